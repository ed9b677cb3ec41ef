//! `mcp`: the sessions as tools of a stdio MCP server, for agents of any vendor.
//!
//! Each tool answers with the `--json` shape of the command it stands for, from the same
//! code: `list_sessions` as `list`, `show_session` as `show`, `inbound_policy` as
//! `settings effective`, `send_message` as `send` through Claude Code (with
//! `session_ids`, as `send` to several targets; with `queue`, as `send --queue`),
//! `outbox` as `outbox` (wrapped in an object, bounded by `limit`). A refusal or an error is a tool error
//! carrying the refusal JSON, but a send to several sessions answers every target's
//! result, failed ones too, and is a tool error only when it fails as a whole. A request
//! that is not a valid call (unknown tool, wrong-typed argument, oversized message,
//! sender name that `--from` refuses, both or neither of `session_id` and `session_ids`,
//! a `timeout_s` out of range) is a JSON-RPC error. No tool changes settings: an agent
//! must not be able to loosen the user's inbound policy.
//!
//! Every `send_message` goes through one mailbox ([`inbox`]), started by the first and
//! kept for the server's life, in arrival order: one sender, whose address receivers
//! reply to, so replies, later receipts and idle notices reach the agent through
//! `wait_for_messages` and `notifications/message`. A call the client cancels before the
//! mailbox takes it is not sent; one taken is sent whole. A closed stdin or a stop signal
//! (SIGINT, SIGTERM, SIGHUP, SIGQUIT) closes the mailbox cleanly, its waiting calls
//! unsent (a second signal exits at once).
//!
//! The async runtime lives here, in the command, and only for this subcommand: the
//! library crates stay synchronous, and their blocking calls run on tokio's blocking pool
//! or the mailbox's thread.

mod args;
mod history;
mod inbox;
mod install;
mod post;
mod result;
mod sessions_resource;

pub(crate) use install::{Action, exec as install};

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use claude_peer_deliver::check_message;
use claude_peer_resolve::Scope;
use claude_peer_sender::Idle;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
#[allow(deprecated, reason = "logging is what clients speak today")]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use serde_json::Value;

use crate::error::{Exit, Failure};
use crate::json::{EventsJson, SessionDetailJson, SessionJson, SessionsJson, WhoamiJson};
use crate::ops::{Context, policy, sessions, whoami};
use crate::output::{Format, Output};
use crate::signals;
use args::{
    HistoryArgs, ListArgs, OutboxArgs, PolicyArgs, ReplyArgs, SendArgs, ShowArgs, WaitArgs,
};
use inbox::{Events, Inbox, Whom};
use result::{blocking, to_json, tool_result};

/// How rmcp begins the message of arguments that do not deserialize.
const BAD_ARGUMENTS: &str = "failed to deserialize parameters:";

/// The longest `wait_for_messages` may wait, in seconds.
const MAX_WAIT_S: f64 = 300.0;

/// What the server was started with, and what it keeps.
#[derive(Debug)]
struct Config {
    ctx: Context,
    /// The Claude Code that `send_message` sends with; `None`: `claude` on `PATH`.
    claude: Option<PathBuf>,
    /// What the mailbox heard, for `wait_for_messages`; there before the mailbox is.
    events: Arc<Events>,
    /// The mailbox, once a `send_message` started it.
    inbox: tokio::sync::Mutex<Option<Arc<Inbox>>>,
    /// Set once the server ends: no mailbox is started after it closed.
    ending: AtomicBool,
    /// The client, once it called a tool: new events are announced to it.
    peer: Mutex<Option<Peer<RoleServer>>>,
}

/// Serves MCP on stdin and stdout until the client closes stdin or a signal comes.
pub(crate) fn run(ctx: Context, claude: Option<PathBuf>) -> Result<Exit, Failure> {
    let signalled = watch_signals()?;
    let (to_announce, announced) = tokio::sync::mpsc::channel(inbox::MAX_ANNOUNCEMENTS);
    let config = Arc::new(Config {
        ctx,
        claude,
        events: Arc::new(Events::new(to_announce)),
        inbox: tokio::sync::Mutex::new(None),
        ending: AtomicBool::new(false),
        peer: Mutex::new(None),
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            Failure::error("mcp_failed", format!("cannot start the MCP server: {err}"))
        })?;
    let served = runtime.block_on(async {
        let server = Peers::new(Arc::clone(&config))
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|err| {
                Failure::error(
                    "mcp_failed",
                    format!("the MCP session did not start: {err}"),
                )
            })?;
        tokio::spawn(announce(Arc::clone(&config), announced));
        let token = server.cancellation_token();
        let waiting = server.waiting();
        tokio::pin!(waiting);
        let ended = tokio::select! {
            quit = &mut waiting => (quit, None),
            Ok(signal) = signalled => {
                token.cancel();
                (waiting.await, Some(signal))
            }
        };
        // The client is gone, or a signal came: the mailbox closes cleanly (a send that
        // is starting it finishes first, as it holds the lock).
        let mut slot = config.inbox.lock().await;
        config.ending.store(true, Ordering::Release);
        if let Some(inbox) = slot.take() {
            let _ = tokio::task::spawn_blocking(move || inbox.close()).await;
        }
        Ok::<_, Failure>(ended)
    });
    // Nothing left to answer: a read of stdin still blocked is not waited for.
    runtime.shutdown_background();
    let (quit, signal) = served?;
    if let Some(signal) = signal {
        return Ok(signals::exit_for(signal));
    }
    quit.map_err(|err| Failure::error("mcp_failed", format!("the MCP server failed: {err}")))?;
    Ok(Exit::Success)
}

/// Announces each event to the client, once it called a tool, as `notifications/message`.
#[allow(
    deprecated,
    reason = "notifications/message is how clients hear a server today"
)]
async fn announce(config: Arc<Config>, mut events: tokio::sync::mpsc::Receiver<Arc<Value>>) {
    while let Some(event) = events.recv().await {
        let peer = config
            .peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(peer) = peer {
            let mut message = LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                Arc::unwrap_or_clone(event),
            );
            message.logger = Some("claude-peers".to_owned());
            // A client that does not take it misses an announcement, not the event.
            let _ = peer.notify_logging_message(message).await;
        }
    }
}

/// Watches for the stop signals: the first is told through the receiver (the server
/// then ends and closes its mailbox), a second exits at once.
fn watch_signals() -> Result<tokio::sync::oneshot::Receiver<i32>, Failure> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    signals::watch(
        move |first| {
            let _ = tx.send(first);
        },
        || {},
    )?;
    Ok(rx)
}

/// The MCP server: the tools and the `claude-peers://sessions` resource.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    config: Arc<Config>,
    resource: sessions_resource::SessionsResource,
}

#[tool_router]
impl Peers {
    fn new(config: Arc<Config>) -> Self {
        Self {
            resource: sessions_resource::SessionsResource::new(config.ctx.clone()),
            config,
        }
    }

    #[tool(
        description = "List the live Claude Code sessions on this machine (name, status, cwd, pid, whether each can be messaged); all=true lists every registry record with its liveness verdict.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_sessions(&self, Parameters(args): Parameters<ListArgs>) -> CallToolResult {
        let config = Arc::clone(&self.config);
        let scope = if args.all { Scope::All } else { Scope::Live };
        blocking(move || {
            let found = diagnostics().warned(sessions::scan(&config.ctx, scope))?;
            let sessions = found.iter().map(SessionJson::new).collect();
            to_json(&SessionsJson { sessions })
        })
        .await
    }

    #[tool(
        description = "Show one Claude Code session in full (former names, peer features, why it cannot be messaged, …), by session id or by the name of exactly one live session.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn show_session(&self, Parameters(args): Parameters<ShowArgs>) -> CallToolResult {
        let config = Arc::clone(&self.config);
        blocking(move || {
            let session = diagnostics().warned(sessions::find(&config.ctx, &args.session))?;
            let transcript = diagnostics().warned(sessions::transcript(&config.ctx, &session));
            to_json(&SessionDetailJson::new(&session, transcript.as_ref()))
        })
        .await
    }

    #[tool(
        description = "The live Claude Code session this server runs under (found through its parent processes, as Claude Code starts its MCP servers; never from an inherited variable, so it is right after /clear too): the object list_sessions gives for it, so a peer can be told where to reply. not_in_a_session when no session runs it.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn whoami(&self) -> CallToolResult {
        let config = Arc::clone(&self.config);
        blocking(move || {
            let session = whoami::whoami(&config.ctx, std::process::id())?;
            to_json(&WhoamiJson {
                session: SessionJson::live(&session),
            })
        })
        .await
    }

    #[tool(
        description = "Tell whether sessions in a directory accept cross-session messages: the effective crossSessionInbound (accept, hold, refuse or default) and every settings layer read. Read-only.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn inbound_policy(
        &self,
        Parameters(args): Parameters<PolicyArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(cwd) = args
            .cwd
            .as_deref()
            .filter(|cwd| !Path::new(cwd).is_absolute())
        {
            return Err(ErrorData::invalid_params(
                format!("cwd `{cwd}` is not an absolute path"),
                None,
            ));
        }
        let config = Arc::clone(&self.config);
        Ok(blocking(move || {
            let report = policy::effective(&config.ctx, args.cwd.map(PathBuf::from))?;
            to_json(&crate::json::EffectivePolicyJson::new(&report))
        })
        .await)
    }

    #[tool(
        description = "Send one message to one live Claude Code session (session_id: its id, or the name of exactly one live session), or to several (session_ids, ids or names: each once, answered per target with delivered and failed counts), through Claude Code's own SendMessage, after checking identity and inbound policy; reports what each receiver did, from its own transcript (read, queued while it is busy, held for its user) or why it was refused. Every call goes through this server's one long-lived sender, in arrival order, so replies to it come back: read them with wait_for_messages. notify_when_idle=true also reports when the receiver next finishes its turn.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn send_message(
        &self,
        Parameters(args): Parameters<SendArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        // An oversized message or a name `--from` refuses is a malformed call, answered
        // before it waits for the mailbox; an empty message is refused as `send` does.
        if let Err(err @ claude_peer_deliver::Error::MessageTooLarge { .. }) =
            check_message(&args.message)
        {
            return Err(ErrorData::invalid_params(err.to_string(), None));
        }
        if let Some(Err(err)) = args
            .from
            .as_deref()
            .map(claude_peer_sender::check_sender_name)
        {
            return Err(ErrorData::invalid_params(err.to_string(), None));
        }
        if args.queue {
            return self.queue(args).await;
        }
        if args.expire_s.is_some() || args.id.is_some() {
            return Err(ErrorData::invalid_params(
                "`expire_s` and `id` go with `queue: true`; nothing was sent",
                None,
            ));
        }
        let whom = match (args.session_id, args.session_ids) {
            (Some(session_id), None) => Whom::One(session_id),
            (None, Some(session_ids)) if !session_ids.is_empty() => Whom::Several(session_ids),
            (Some(_), Some(_)) => {
                return Err(ErrorData::invalid_params(
                    "pass `session_id` or `session_ids`, not both",
                    None,
                ));
            }
            (None, _) => {
                return Err(ErrorData::invalid_params(
                    "pass `session_id`, or a non-empty `session_ids` for several sessions",
                    None,
                ));
            }
        };
        let inbox = match self.inbox(args.from).await {
            Ok(inbox) => inbox?,
            Err(failure) => return Ok(tool_result(Err(failure))),
        };
        let idle = if args.notify_when_idle {
            Idle::Notify
        } else {
            Idle::Ignore
        };
        let ct = context.ct.clone();
        let cancelled = Box::new(move || ct.is_cancelled());
        Ok(tool_result(
            inbox
                .send(whom, (args.message, None), idle, cancelled)
                .await,
        ))
    }

    #[tool(
        description = "The messages this user's post office still holds (queued with send_message queue=true, or by any other front end), oldest first: {\"messages\":[…],\"waiting\":N,\"failed\":[]}, each with its state (waiting and why, sending, unknown), attempts and expiry; at most limit (default 100, up to 1000) listed, waiting counting them all. cancel=[post ids] cancels waiting or unknown messages (never delivered), retry=[post ids] tries unknown ones again; both answer the records changed and, in failed, each id that could not be.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            open_world_hint = false
        )
    )]
    async fn outbox(
        &self,
        Parameters(args): Parameters<OutboxArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let action = post::Action::of(args)?;
        let config = Arc::clone(&self.config);
        Ok(blocking(move || post::outbox(&config.ctx, config.claude.clone(), action)).await)
    }

    #[tool(
        description = "Wait for what this server's sender heard since the last call: replies and other messages to it (event message, with the sender's session_id and text), later receipts of messages sent (receipt), idle notices (idle), notices, or its end (closed). Returns {\"events\":[…]}, each event once, as soon as there is one, or empty after timeout_s seconds (0 to 300, default 30). Events are also announced as notifications/message.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn wait_for_messages(
        &self,
        Parameters(args): Parameters<WaitArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let timeout = match &args.timeout_s {
            None => 30.0,
            Some(value) => value
                .as_f64()
                .filter(|t| (0.0..=MAX_WAIT_S).contains(t))
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("timeout_s must be a number of seconds from 0 to 300, not {value}"),
                        None,
                    )
                })?,
        };
        let ct = context.ct;
        let events = self
            .config
            .events
            .wait(Duration::from_secs_f64(timeout), ct.cancelled(), || {
                ct.is_cancelled()
            })
            .await;
        Ok(tool_result(to_json(&EventsJson { events: &events })))
    }

    #[tool(
        description = "The history of this user's messages, out and in (replies and others to any of our senders): {\"messages\":[…]}, each record with direction (in/out), from, to, text, state, receipt, session_id and session_name (the other session), in_reply_to (the post id it answers; inferred=true when taken as the latest message delivered to the replying session) and its timeline. with: the conversation with one session (id or name), oldest first; search: full-text (words, \"a phrase\", word*, AND, OR, NOT), newest first; thread: a message and everything that answered it; direction: in or out; limit 1 to 1000 (default 50), the newest.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn history(
        &self,
        Parameters(args): Parameters<HistoryArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        history::history(args).await
    }

    #[tool(
        description = "Answer a message that came in (id: its post id, from a message event or history), linked to it (in_reply_to): sent at once through this server's sender to the session it came from while that lives (answered as send_message answers), else queued in the post office for whichever session holds its name (answered with its record).",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            open_world_hint = false
        )
    )]
    async fn reply(
        &self,
        Parameters(args): Parameters<ReplyArgs>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let ct = context.ct;
        history::reply(self, args, Box::new(move || ct.is_cancelled())).await
    }
}

impl Peers {
    /// The server's sender name once it has one.
    async fn sender_name_if_any(&self) -> Option<String> {
        self.config
            .inbox
            .lock()
            .await
            .as_ref()
            .map(|inbox| inbox.from.clone())
    }

    /// The server's sender name: its sender's, else the default.
    async fn sender_name(&self) -> String {
        self.sender_name_if_any()
            .await
            .unwrap_or_else(|| claude_peer_sender::DEFAULT_SENDER_NAME.to_owned())
    }

    /// `send_message` with `queue`: handed to the post office under `from`, else the
    /// server's sender name (the post office has a sender of each name).
    async fn queue(&self, args: SendArgs) -> Result<CallToolResult, ErrorData> {
        let inbox_from = self.sender_name_if_any().await;
        let order = post::order(args, inbox_from)?;
        let config = Arc::clone(&self.config);
        Ok(blocking(move || post::queue(&config.ctx, config.claude.clone(), &order)).await)
    }

    /// The server's mailbox, started by the first send as its `from` (default
    /// claude-peers); a JSON-RPC error when a later call names another (one sender has
    /// one name).
    async fn inbox(&self, from: Option<String>) -> Result<Result<Arc<Inbox>, ErrorData>, Failure> {
        let mut slot = self.config.inbox.lock().await;
        if let Some(inbox) = slot.as_ref() {
            if let Some(from) = from.filter(|from| *from != inbox.from) {
                return Ok(Err(ErrorData::invalid_params(
                    format!(
                        "this server sends as `{}` (its first send's `from`); `from` `{from}` cannot be used",
                        inbox.from
                    ),
                    None,
                )));
            }
            return Ok(Ok(Arc::clone(inbox)));
        }
        if self.config.ending.load(Ordering::Acquire) {
            return Err(Failure::error(
                "mcp_ending",
                "the server is ending; nothing was sent",
            ));
        }
        let from = from.unwrap_or_else(|| claude_peer_sender::DEFAULT_SENDER_NAME.to_owned());
        let config = Arc::clone(&self.config);
        let events = Arc::clone(&config.events);
        let opened = tokio::task::spawn_blocking(move || {
            Inbox::open(&config.ctx, config.claude.clone(), from, events)
        })
        .await
        .unwrap_or_else(|err| {
            Err(Failure::error(
                "internal",
                format!("the mailbox did not start: {err}"),
            ))
        })?;
        let inbox = Arc::new(opened);
        *slot = Some(Arc::clone(&inbox));
        Ok(Ok(inbox))
    }
}

#[tool_handler]
impl ServerHandler for Peers {
    #[allow(
        deprecated,
        reason = "the logging capability is what clients speak today"
    )]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(Implementation::new("claude-peers", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "The live Claude Code sessions on this machine: list and inspect them, check whether one accepts messages, and message it through Claude Code's own SendMessage.",
        )
    }

    /// Up to the last revision with `initialize` and `resources/subscribe`, which the
    /// sessions resource speaks and clients use today.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.config
            .peer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| context.peer.clone());
        let call = ToolCallContext::new(self, request, context);
        let response = Self::tool_router().call(call).await?;
        // rmcp answers arguments that do not fit a tool's schema with a tool error; here
        // a wrong-typed or missing argument is a malformed call, so a JSON-RPC error.
        if let CallToolResponse::Complete(result) = &response
            && result.is_error == Some(true)
            && let [ContentBlock::Text(text)] = result.content.as_slice()
            && text.text.starts_with(BAD_ARGUMENTS)
        {
            return Err(ErrorData::invalid_params(text.text.clone(), None));
        }
        Ok(response)
    }

    /// Every event is announced at level info, whatever level the client asks for.
    #[allow(deprecated, reason = "logging/setLevel is what clients speak today")]
    async fn set_level(
        &self,
        _request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            sessions_resource::SessionsResource::describe(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        sessions_resource::check_uri(&request.uri)?;
        Ok(self.resource.read().await?.into())
    }

    #[allow(deprecated, reason = "resources/subscribe is what clients speak today")]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        sessions_resource::check_uri(&request.uri)?;
        self.resource.subscribe(context.peer).await
    }

    #[allow(
        deprecated,
        reason = "resources/unsubscribe is what clients speak today"
    )]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        sessions_resource::check_uri(&request.uri)?;
        self.resource.unsubscribe();
        Ok(())
    }
}

/// Where scan warnings go: stderr, as with `--json` (stdout is the protocol's).
fn diagnostics() -> Output {
    Output::new(Format::Json)
}
