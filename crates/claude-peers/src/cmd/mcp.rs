//! `mcp`: the sessions as tools of a stdio MCP server, for agents of any vendor.
//!
//! Each tool answers with the `--json` shape of the command it stands for, from the same
//! code: `list_sessions` as `list`, `show_session` as `show`, `inbound_policy` as
//! `settings effective`, `send_message` as `send` through Claude Code (with
//! `session_ids`, as `send` to several targets). A refusal or an error is a tool error
//! carrying the refusal JSON, but a send to several sessions answers every target's
//! result, failed ones too, and is a tool error only when it fails as a whole. A request
//! that is not a valid call (unknown tool, wrong-typed argument, oversized message,
//! sender name that `--from` refuses, both or neither of `session_id` and `session_ids`)
//! is a JSON-RPC error. No tool changes settings: an agent must not be able to loosen
//! the user's inbound policy.
//!
//! Each call runs its own Claude Code (one for all of its sessions), so at most
//! [`SENDERS`] run at once and later calls wait their turn in arrival order: a client
//! cannot start hundreds. A call the client cancels (`notifications/cancelled`) is not
//! sent if its turn has not come, and has its sender stopped if it has (a message
//! already handed over stays sent). SIGINT and SIGTERM stop every send; so does a closed
//! stdin, once rmcp has let the calls under way answer for up to 5 s.
//!
//! The async runtime lives here, in the command, and only for this subcommand: the
//! library crates stay synchronous, and their blocking calls run on tokio's blocking pool.

mod sessions_resource;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use claude_peer_deliver::{DEFAULT_TIMEOUT, check_message};
use claude_peer_resolve::Scope;
use claude_peer_sender::Cancel;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinError;

use crate::error::{Exit, Failure};
use crate::json::{
    BroadcastJson, DeliveredJson, SessionDetailJson, SessionJson, SessionsJson, Via, WhoamiJson,
};
use crate::ops::broadcast::{Targets, broadcast};
use crate::ops::send::{self, Relayed};
use crate::ops::{Context, policy, sessions, whoami};
use crate::output::Output;
use crate::signals::{Interrupt, OnSignal};

/// How rmcp begins the message of arguments that do not deserialize.
const BAD_ARGUMENTS: &str = "failed to deserialize parameters:";

/// How many senders may run at once.
const SENDERS: usize = 4;

/// What the server was started with.
#[derive(Debug)]
struct Config {
    ctx: Context,
    /// The Claude Code that `send_message` sends with; `None`: `claude` on `PATH`.
    claude: Option<PathBuf>,
    /// Pulled by SIGINT or SIGTERM (then the server exits) or a closed stdin: sends
    /// under way are stopped and cleaned up. Each call sends with a child of it.
    cancel: Cancel,
    /// The senders' turns, granted in the order calls asked (tokio's semaphore is fair).
    senders: Arc<Semaphore>,
}

/// Serves MCP on stdin and stdout until the client closes stdin.
pub(crate) fn run(ctx: Context, claude: Option<PathBuf>) -> Result<Exit, Failure> {
    let interrupt = Interrupt::watch(OnSignal::CancelAndExit)?;
    let config = Config {
        ctx,
        claude,
        cancel: interrupt.cancel(),
        senders: Arc::new(Semaphore::new(SENDERS)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|err| {
            Failure::error("mcp_failed", format!("cannot start the MCP server: {err}"))
        })?;
    runtime.block_on(async {
        let server = Peers::new(config)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|err| {
                Failure::error(
                    "mcp_failed",
                    format!("the MCP session did not start: {err}"),
                )
            })?;
        let quit = server.waiting().await;
        // The client is gone (rmcp gave the calls up to 5 s to answer): the sends still
        // running stop, and the runtime's end waits for their senders to be reaped.
        // rmcp cancels those calls too, but a call's task may not run again to see it.
        interrupt.cancel().cancel();
        quit.map_err(|err| Failure::error("mcp_failed", format!("the MCP server failed: {err}")))?;
        Ok(Exit::Success)
    })
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ListArgs {
    /// Every record in the registry with its liveness verdict and reason, not only the live sessions.
    #[serde(default)]
    all: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct ShowArgs {
    /// A session id, or the name of exactly one live session.
    session: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct PolicyArgs {
    /// The session's working directory, an absolute path (default: the server's).
    cwd: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
struct SendArgs {
    /// The receiving session's id (from `list_sessions`).
    session_id: Option<String>,
    /// Instead of `session_id`: the ids of several receiving sessions, each sent to once.
    session_ids: Option<Vec<String>>,
    /// The text to deliver, at most 65536 bytes.
    message: String,
    /// The sender's name, which the receiver sees (default: claude-peers).
    from: Option<String>,
}

/// Whom a `send_message` call is for.
enum Whom {
    One(String),
    Several(Vec<String>),
}

/// The MCP server: the tools and the `claude-peers://sessions` resource.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    config: Arc<Config>,
    resource: sessions_resource::SessionsResource,
}

#[tool_router]
impl Peers {
    fn new(config: Config) -> Self {
        Self {
            resource: sessions_resource::SessionsResource::new(config.ctx.clone()),
            config: Arc::new(config),
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
            let scan = sessions::scan(&config.ctx, scope, &diagnostics())?;
            let sessions = scan.sessions.iter().map(SessionJson::new).collect();
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
            let session = sessions::find(&config.ctx, &args.session, &diagnostics())?;
            let transcript = sessions::transcript(&config.ctx, &session, &diagnostics());
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
            to_json(&report)
        })
        .await)
    }

    #[tool(
        description = "Send one message to one live Claude Code session (session_id), or to several (session_ids: each once, answered per target with delivered and failed counts), through Claude Code's own SendMessage, after checking identity and inbound policy; reports what each receiver did, from its own transcript (read, queued while it is busy, held for its user) or why it was refused. At most 4 calls send at once; others wait their turn.",
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
        // before it waits for a turn; an empty message is refused as `send` does.
        if let Err(err @ claude_peer_deliver::Error::MessageTooLarge { .. }) =
            check_message(&args.message)
        {
            return Err(ErrorData::invalid_params(err.to_string(), None));
        }
        let from = args
            .from
            .unwrap_or_else(|| claude_peer_sender::DEFAULT_SENDER_NAME.to_owned());
        if let Err(err) = claude_peer_sender::check_sender_name(&from) {
            return Err(ErrorData::invalid_params(err.to_string(), None));
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
        let turn = Arc::clone(&self.config.senders).acquire_owned();
        // Cancelled before its turn: nothing was started (rmcp drops this answer).
        let turn = context.ct.run_until_cancelled(turn).await;
        let Some(Ok(turn)) = turn.filter(|_| !context.ct.is_cancelled()) else {
            return Ok(tool_result(Err(Failure::error(
                "cancelled",
                "the call was cancelled before its turn to send; nothing was sent",
            ))));
        };
        let config = Arc::clone(&self.config);
        let cancel = config.cancel.child();
        let call = cancel.clone();
        let mut work = tokio::task::spawn_blocking(move || {
            let _turn = turn;
            let relay = Relayed::Claude(
                send::claude(config.claude.clone(), from, DEFAULT_TIMEOUT)?.cancel_with(call),
            );
            match whom {
                Whom::One(session_id) => {
                    let delivered = send::send(&config.ctx, &session_id, &args.message, &relay)?;
                    to_json(&DeliveredJson::new(&delivered, Via::Claude))
                }
                // One sender serves them all, on this call's one turn.
                Whom::Several(given) => {
                    let targets = Targets {
                        given,
                        ..Targets::default()
                    };
                    let outcomes = broadcast(&config.ctx, &targets, &args.message, &relay)?;
                    to_json(&BroadcastJson::new(&outcomes, Via::Claude))
                }
            }
        });
        // Cancelled on its turn: its sender is stopped, and reaped before the call ends.
        let done = if let Some(done) = context.ct.run_until_cancelled(&mut work).await {
            done
        } else {
            cancel.cancel();
            work.await
        };
        Ok(tool_result(joined(done)))
    }
}

#[tool_handler]
impl ServerHandler for Peers {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
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
    Output::new(true)
}

fn to_json(value: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|err| Failure::error("internal", err.to_string()))
}

/// Runs a command's blocking work off the protocol loop, as [`tool_result`].
async fn blocking(
    work: impl FnOnce() -> Result<String, Failure> + Send + 'static,
) -> CallToolResult {
    tool_result(joined(tokio::task::spawn_blocking(work).await))
}

/// Blocking work's result, or why it has none.
fn joined(done: Result<Result<String, Failure>, JoinError>) -> Result<String, Failure> {
    done.unwrap_or_else(|err| {
        Err(Failure::error(
            "internal",
            format!("the tool's work failed: {err}"),
        ))
    })
}

/// A command's JSON, in its key order, as the result's text and, parsed, its structured
/// content; a failure is a tool error carrying the failure's JSON.
fn tool_result(result: Result<String, Failure>) -> CallToolResult {
    let (text, is_error) = match result {
        Ok(text) => (text, false),
        Err(failure) => (failure.json(), true),
    };
    let mut result = if is_error {
        CallToolResult::structured_error(serde_json::from_str(&text).unwrap_or(Value::Null))
    } else {
        CallToolResult::structured(serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    result.content = vec![ContentBlock::text(text)];
    result
}
