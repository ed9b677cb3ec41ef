//! `claude-peers mcp` through rmcp's client over the real binary: every tool against
//! the command it stands for, every refusal, bad requests, and the sessions resource.
#![allow(
    deprecated,
    reason = "resources/subscribe is what the server and clients speak"
)]

use std::ffi::OsString;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ReadResourceRequestParams, ResourceContents,
    ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, shell_script};

use crate::support::CommandHome as _;

/// The client side: forwards each `notifications/resources/updated` to the test.
#[derive(Debug, Clone)]
struct Listener(mpsc::UnboundedSender<String>);

impl ClientHandler for Listener {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

/// A running `claude-peers --home HOME mcp` and an rmcp client connected to it.
pub(crate) struct Mcp {
    runtime: tokio::runtime::Runtime,
    client: RunningService<RoleClient, Listener>,
    updates: mpsc::UnboundedReceiver<String>,
}

impl Mcp {
    /// Starts the server on `home`, with no managed settings and `args` after `mcp`.
    pub(crate) fn start(home: &Path, args: &[OsString]) -> Self {
        Self::start_with(home, args, |_| {})
    }

    /// The same, its environment adjusted by `env`.
    pub(crate) fn start_with(
        home: &Path,
        args: &[OsString],
        env: impl FnOnce(&mut tokio::process::Command),
    ) -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_claude-peers"));
        command
            .arg("--home")
            .arg(home)
            .arg("mcp")
            .arg("--managed-settings")
            .arg(home.join("no-managed-settings.json"))
            .args(args)
            .env_remove("CLAUDE_CONFIG_DIR");
        env(&mut command);
        let (sender, updates) = mpsc::unbounded_channel();
        let client = runtime.block_on(async {
            Listener(sender)
                .serve(TokioChildProcess::new(command).unwrap())
                .await
                .unwrap()
        });
        Self {
            runtime,
            client,
            updates,
        }
    }

    pub(crate) fn call(
        &self,
        tool: &str,
        arguments: Value,
    ) -> Result<CallToolResult, ServiceError> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        self.runtime.block_on(self.client.call_tool(params))
    }

    /// `call`, given up by the client after `within`: rmcp then tells the server the
    /// request is cancelled (`notifications/cancelled`).
    pub(crate) fn call_within(
        &self,
        tool: &str,
        arguments: Value,
        within: Duration,
    ) -> Result<Value, ServiceError> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
        let options = rmcp::service::PeerRequestOptions::with_timeout(within);
        self.runtime.block_on(async {
            let handle = self
                .client
                .send_cancellable_request(request, options)
                .await?;
            match handle.await_response().await? {
                rmcp::model::ServerResult::CallToolResult(result) => Ok(structured(&result)),
                other => panic!("not a tool result: {other:?}"),
            }
        })
    }

    /// A successful call's structured result, checked to be its text too.
    pub(crate) fn ok(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).unwrap();
        assert_eq!(result.is_error, Some(false), "{tool} succeeds: {result:?}");
        structured(&result)
    }

    /// A tool error's JSON, checked to be its text too.
    pub(crate) fn tool_error(&self, tool: &str, arguments: Value) -> Value {
        let result = self.call(tool, arguments).unwrap();
        assert_eq!(
            result.is_error,
            Some(true),
            "{tool} is a tool error: {result:?}"
        );
        structured(&result)
    }

    /// A JSON-RPC error's code and message.
    pub(crate) fn rpc_error(&self, tool: &str, arguments: Value) -> (i32, String) {
        match self.call(tool, arguments) {
            Err(ServiceError::McpError(error)) => (error.code.0, error.message.into_owned()),
            other => panic!("{tool} is a JSON-RPC error, not {other:?}"),
        }
    }

    fn read_sessions(&self) -> Value {
        let params = ReadResourceRequestParams::new("claude-peers://sessions");
        let result = self
            .runtime
            .block_on(self.client.read_resource(params))
            .unwrap();
        let [
            ResourceContents::TextResourceContents {
                text, mime_type, ..
            },
        ] = result.contents.as_slice()
        else {
            panic!("one text content: {result:?}")
        };
        assert_eq!(mime_type.as_deref(), Some("application/json"));
        serde_json::from_str(text).unwrap()
    }

    /// Waits for updates of the sessions resource until it shows what `shows` wants:
    /// every change is announced, and the one read after it shows the change. A record
    /// caught half-written may announce a state in between, but never 20 of them.
    fn until_announced(&mut self, what: &str, shows: impl Fn(&Value) -> bool) {
        for _ in 0..20 {
            let update = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), self.updates.recv()).await
            });
            let uri = update.ok().flatten();
            assert_eq!(
                uri.as_deref(),
                Some("claude-peers://sessions"),
                "{what}: announced within 10 s"
            );
            if shows(&self.read_sessions()) {
                return;
            }
        }
        panic!("{what}: 20 updates and the resource never showed it");
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let client = &mut self.client;
        let _ = self.runtime.block_on(client.close());
    }
}

/// The structured content, which must be exactly the JSON of the one text block.
fn structured(result: &CallToolResult) -> Value {
    let [content] = result.content.as_slice() else {
        panic!("one content block: {result:?}")
    };
    let text = &content.as_text().expect("a text block").text;
    let parsed: Value = serde_json::from_str(text).unwrap();
    let structured = result
        .structured_content
        .clone()
        .expect("structured content");
    assert_eq!(parsed, structured, "the text is the structured content");
    structured
}

/// A home with two live addressable sessions, one crashed and one not addressable.
fn registry() -> (TempHome, Vec<Sleeper>) {
    let mut home = TempHome::new().unwrap();
    let children: Vec<Sleeper> = (0..4).map(|_| Sleeper::spawn().unwrap()).collect();
    home.live_record(&children[0], "s-reviewer", "reviewer", "idle", true);
    home.live_record(&children[1], "s-builder", "builder", "busy", true);
    home.live_record(&children[2], "s-crashed", "crashed", "idle", true);
    home.live_record(&children[3], "s-mute", "mute", "idle", false);
    let mut children = children;
    children[2].crash().unwrap();
    (home, children)
}

#[test]
fn the_tools_and_the_resource_are_what_a_client_sees_with_schemas_and_one_line_descriptions() {
    let home = TempHome::new().unwrap();
    let mcp = Mcp::start(home.root(), &[]);

    let info = mcp
        .client
        .peer_info()
        .expect("the server introduced itself");
    assert_eq!(info.server_info.as_ref().unwrap().name, "claude-peers");
    let resources = info.capabilities.resources.as_ref().expect("resources");
    assert_eq!(
        resources.subscribe,
        Some(true),
        "the resource can be subscribed to"
    );
    let tools = mcp.runtime.block_on(mcp.client.list_all_tools()).unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names.join(" "),
        "history inbound_policy list_sessions outbox reply send_message show_session wait_for_messages whoami",
        "no tool changes settings"
    );
    for tool in &tools {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(
            !description.is_empty() && !description.contains('\n'),
            "{}: one line: {description:?}",
            tool.name
        );
        assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
    }
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object((*tool.input_schema).clone())
    };
    assert_eq!(schema("send_message")["required"], json!(["message"]));
    assert_eq!(schema("show_session")["required"], json!(["session"]));
    assert_eq!(
        schema("list_sessions")["properties"]["all"]["type"],
        "boolean"
    );
    assert!(
        schema("inbound_policy").get("required").is_none(),
        "cwd is optional"
    );
    let send = schema("send_message");
    assert_eq!(send["properties"]["queue"]["type"], "boolean");
    assert!(send["properties"]["expire_s"].is_object(), "{send}");
    assert!(send["properties"]["id"].is_object(), "{send}");
    let outbox = schema("outbox");
    assert!(outbox.get("required").is_none(), "listing needs nothing");
    for key in ["cancel", "retry", "limit"] {
        assert!(outbox["properties"][key].is_object(), "{key}: {outbox}");
    }

    let listed = mcp
        .runtime
        .block_on(mcp.client.list_all_resources())
        .unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["claude-peers://sessions"]);
    assert_eq!(listed[0].mime_type.as_deref(), Some("application/json"));
}

#[test]
fn list_sessions_is_list_json_and_with_all_is_list_all_json() {
    let (home, _children) = registry();
    let mcp = Mcp::start(home.root(), &[]);

    let live = mcp.ok("list_sessions", json!({}));
    let (code, cli, _) = home.json(&["list"]);
    assert_eq!(code, 0);
    assert_eq!(live["sessions"], cli, "the same sessions in the same shape");
    let names: Vec<&str> = cli
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "the crashed session is not live: {names:?}");

    let all = mcp.ok("list_sessions", json!({"all": true}));
    let (_, cli_all, _) = home.json(&["list", "--all"]);
    assert_eq!(all["sessions"], cli_all);
    assert_eq!(cli_all.as_array().unwrap().len(), 4);
    assert_eq!(mcp.read_sessions(), cli, "the resource is the live list");
}

#[test]
fn show_session_is_show_json_by_id_or_name_and_refuses_what_show_refuses() {
    let (mut home, children) = registry();
    let mcp = Mcp::start(home.root(), &[]);

    for target in ["s-reviewer", "reviewer", "s-crashed"] {
        let shown = mcp.ok("show_session", json!({"session": target}));
        let (code, cli, _) = home.json(&["show", target]);
        assert_eq!(code, 0);
        assert_eq!(shown, cli, "{target}");
    }
    let mute = mcp.ok("show_session", json!({"session": "mute"}));
    assert!(
        mute["not_addressable_reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{mute}"
    );

    let missing = mcp.tool_error("show_session", json!({"session": "nobody"}));
    assert_eq!(missing, home.json(&["show", "nobody"]).1);
    assert_eq!(missing["error"], "not_found");

    let twin = Sleeper::spawn().unwrap();
    home.live_record(&twin, "s-twin", "reviewer", "idle", true);
    let shared = mcp.tool_error("show_session", json!({"session": "reviewer"}));
    assert_eq!(shared["refusal"], "identity_mismatch");
    assert!(
        shared["message"]
            .as_str()
            .unwrap()
            .contains(&children[0].pid().to_string()),
        "{shared}"
    );
}

#[test]
fn inbound_policy_is_settings_effective_and_a_relative_cwd_is_refused_by_name() {
    let home = TempHome::new().unwrap();
    let project = home.root().join("project");
    fs::create_dir_all(project.join(".claude")).unwrap();
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"hold"}"#,
    )
    .unwrap();
    fs::write(
        project.join(".claude/settings.json"),
        r#"{"crossSessionInbound":"refuse"}"#,
    )
    .unwrap();
    let mcp = Mcp::start(home.root(), &[]);

    let cwd = project.to_str().unwrap();
    let report = mcp.ok("inbound_policy", json!({"cwd": cwd}));
    let managed = home.root().join("no-managed-settings.json");
    let (code, cli, _) = home.json(&[
        "settings",
        "effective",
        "--cwd",
        cwd,
        "--managed-settings",
        managed.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(report, cli);
    assert_eq!(report["value"], "refuse");

    let (code, message) = mcp.rpc_error("inbound_policy", json!({"cwd": "some/where"}));
    assert_eq!(code, -32602, "invalid params");
    assert!(message.contains("`some/where`"), "{message}");
}

/// Writes an executable stand-in for `claude` that fails as a sender.
fn failing_claude(dir: &Path) -> OsString {
    let body = "read line; echo 'sender crashed' >&2; exit 1";
    shell_script(dir.join("claude"), body)
        .unwrap()
        .into_os_string()
}

#[test]
fn send_message_refuses_as_send_does_and_no_tool_touches_the_settings() {
    let (mut home, _children) = registry();
    // Two live processes claim one session id.
    let (one, two) = (Sleeper::spawn().unwrap(), Sleeper::spawn().unwrap());
    home.live_record(&one, "s-double", "double-a", "idle", true);
    home.live_record(&two, "s-double", "double-b", "idle", true);
    let settings = home.root().join("settings.json");
    fs::write(&settings, r#"{"crossSessionInbound":"accept"}"#).unwrap();
    let tools = tempfile::tempdir().unwrap();
    let mcp = Mcp::start(
        home.root(),
        &["--claude".into(), failing_claude(tools.path())],
    );

    let send = |session: &str| {
        mcp.tool_error(
            "send_message",
            json!({"session_id": session, "message": "hello", "from": "tester"}),
        )
    };
    for (session, refusal) in [
        ("s-crashed", "not_live"),
        ("s-unknown", "not_live"),
        ("s-double", "identity_mismatch"),
        ("s-mute", "not_addressable"),
        ("s-reviewer", "delivery_failed"),
    ] {
        let json = send(session);
        assert_eq!(json["refusal"], refusal, "{session}: {json}");
        assert!(json["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert!(
        send("s-reviewer")["message"]
            .as_str()
            .unwrap()
            .contains("sender crashed"),
        "a crashed mailbox sender is replaced, and the new one's crash told in its words"
    );

    fs::write(&settings, r#"{"crossSessionInbound":"refuse"}"#).unwrap();
    let refused = send("s-reviewer");
    assert_eq!(refused["refusal"], "inbound_refused", "{refused}");
    let empty = mcp.tool_error(
        "send_message",
        json!({"session_id": "s-reviewer", "message": ""}),
    );
    assert!(
        empty["error"].is_string(),
        "an empty message is an error: {empty}"
    );
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        r#"{"crossSessionInbound":"refuse"}"#,
        "no tool wrote the settings"
    );

    let missing = Mcp::start(
        home.root(),
        &["--claude".into(), "/nonexistent/claude".into()],
    );
    fs::write(&settings, r#"{"crossSessionInbound":"accept"}"#).unwrap();
    let json = missing.tool_error(
        "send_message",
        json!({"session_id": "s-reviewer", "message": "hi"}),
    );
    assert_eq!(json["error"], "claude_not_found", "{json}");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/claude")
    );
}

#[test]
fn bad_calls_are_json_rpc_errors_naming_the_problem_and_the_server_keeps_serving() {
    let (home, _children) = registry();
    let mcp = Mcp::start(home.root(), &[]);

    let (code, message) = mcp.rpc_error("change_settings", json!({}));
    assert_eq!(code, -32602, "{message}");
    let (code, message) = mcp.rpc_error("show_session", json!({"session": 5}));
    assert_eq!(code, -32602);
    assert!(message.contains("integer `5`"), "{message}");
    let (code, message) = mcp.rpc_error("send_message", json!({"session_id": "s-reviewer"}));
    assert_eq!(code, -32602);
    assert!(message.contains("message"), "{message}");
    let (code, message) = mcp.rpc_error("list_sessions", json!({"all": "yes"}));
    assert_eq!(code, -32602, "{message}");
    let oversized = "x".repeat(65_537);
    let (code, message) = mcp.rpc_error(
        "send_message",
        json!({"session_id": "s-reviewer", "message": oversized}),
    );
    assert_eq!(code, -32602);
    assert!(message.contains("65537 bytes"), "{message}");

    let params = SubscribeRequestParams::new("claude-peers://elsewhere");
    let Err(ServiceError::McpError(error)) = mcp.runtime.block_on(mcp.client.subscribe(params))
    else {
        panic!("subscribing to another resource is a JSON-RPC error")
    };
    assert!(
        error.message.contains("claude-peers://elsewhere"),
        "{error:?}"
    );

    let live = mcp.ok("list_sessions", json!({}));
    assert_eq!(
        live["sessions"].as_array().unwrap().len(),
        3,
        "still serving"
    );
}

#[test]
fn on_the_wire_unknown_methods_and_malformed_requests_get_errors_and_stdout_holds_only_protocol() {
    let (home, _children) = registry();
    let mut server = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"sessions/delete"}"#,
        r#"{"jsonrpc":"2.0","id":3,"params":{}}"#,
        "this is not JSON",
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_sessions"}}"#,
    ];
    let mut stdin = server.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    let mut answers = Vec::new();
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    while !answers.iter().any(|a: &Value| a["id"] == 4) {
        let mut line = String::new();
        assert_ne!(
            stdout.read_line(&mut line).unwrap(),
            0,
            "the server ended early"
        );
        let answer: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout holds only JSON-RPC ({e}): {line:?}"));
        assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
        answers.push(answer);
    }
    drop(stdin);
    let status = server.wait().unwrap();
    assert!(status.success(), "a closed stdin ends the server cleanly");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(
        rest.trim().is_empty(),
        "nothing after the answers: {rest:?}"
    );

    let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).unwrap();
    assert_eq!(by_id(2)["error"]["code"], -32601, "unknown method");
    assert!(
        answers.iter().any(|a| a["error"]["code"] == -32600),
        "a request without a method is an invalid request: {answers:?}"
    );
    let listed = &by_id(4)["result"]["structuredContent"]["sessions"];
    assert_eq!(
        listed.as_array().unwrap().len(),
        3,
        "served after the bad lines"
    );
}

#[test]
fn a_subscriber_hears_a_session_appear_change_and_vanish() {
    let mut home = TempHome::new().unwrap();
    let mut mcp = Mcp::start(home.root(), &[]);
    let subscribe = SubscribeRequestParams::new("claude-peers://sessions");
    mcp.runtime
        .block_on(mcp.client.subscribe(subscribe))
        .unwrap();
    assert_eq!(mcp.read_sessions(), json!([]));

    let mut child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-new", "newcomer", "idle", true);
    mcp.until_announced("appeared", |list| list[0]["session_id"] == "s-new");
    home.live_record(&child, "s-new", "newcomer", "busy", true);
    mcp.until_announced("changed", |list| list[0]["status"] == "busy");
    child.crash().unwrap();
    mcp.until_announced("vanished", |list| list == &json!([]));
}

#[test]
fn a_sender_name_that_send_refuses_is_a_json_rpc_error_and_nothing_is_started() {
    let (home, _children) = registry();
    let accept = r#"{"crossSessionInbound":"accept"}"#;
    fs::write(home.root().join("settings.json"), accept).unwrap();
    let tools = tempfile::tempdir().unwrap();
    let started = tools.path().join("started");
    let claude = shell_script(
        tools.path().join("claude"),
        &format!("echo started >> '{}'; exit 1", started.display()),
    )
    .unwrap();
    let mcp = Mcp::start(home.root(), &["--claude".into(), claude.into_os_string()]);

    let long = "x".repeat(65);
    for from in ["x\" from=\"uds:/other.sock", "", "-x", "<b>", &long] {
        let (code, message) = mcp.rpc_error(
            "send_message",
            json!({"session_id": "s-reviewer", "message": "hello", "from": from}),
        );
        assert_eq!(code, -32602, "{from:?}: {message}");
        assert!(message.contains("sender name"), "{from:?}: {message}");
    }
    assert!(!started.exists(), "no sender was started");

    let failed = mcp.tool_error(
        "send_message",
        json!({"session_id": "s-reviewer", "message": "hello", "from": "tester"}),
    );
    assert_eq!(failed["refusal"], "delivery_failed", "{failed}");
    assert!(started.exists(), "a good name starts a sender");
}
