//! The post office on a full disk and on a read-only one: the send fails with the
//! reason, and nothing is reported queued. Each runs in a mount namespace of its own,
//! its store on a small tmpfs.

use std::process::Command;

use serde_json::Value;

use crate::receiver::claude;

/// Runs `script` with `bash` in a new mount namespace (a user namespace too, so this
/// needs no root), `$Q TEXT` queueing TEXT through a post office on demand, `$OUTBOX`
/// listing it, `$STORE_DIR` the store's directory (a 0700 tmpfs of 256 KiB) and
/// `$STOP` killing the post office; what it printed.
fn in_namespace(script: &str) -> String {
    let base = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_claude-peers");
    let prelude = format!(
        r#"set -u
export HOME={base}/home XDG_STATE_HOME={base}/state XDG_CACHE_HOME={base}/cache
unset XDG_RUNTIME_DIR
mkdir -p "$HOME/.claude" {base}/state/claude-peers {base}/cache
chmod 700 {base} "$HOME" {base}/state {base}/cache
STORE_DIR={base}/state/claude-peers
mount -t tmpfs -o size=256k,mode=0700 tmpfs "$STORE_DIR"
Q() {{ {bin} --json send --queue --from harness --claude {claude} --message "$1" nobody-here; echo "exit=$?"; }}
OUTBOX="{bin} --json outbox --claude {claude}"
STOP='kill -9 $(cat {base}/cache/claude-peers/post.lock 2>/dev/null) 2>/dev/null; sleep 0.2'
"#,
        base = base.path().display(),
        claude = claude().display(),
    );
    let output = Command::new("unshare")
        .args(["--mount", "--map-root-user", "bash", "-c"])
        .arg(format!("{prelude}{script}\neval \"$STOP\""))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the script failed: {stderr}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The JSON documents and `exit=N` lines the script printed, in order.
fn printed(stdout: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut rest = stdout;
    while !rest.trim_start().is_empty() {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("exit=") {
            let (code, tail) = after.split_once('\n').unwrap_or((after, ""));
            values.push(Value::from(code.trim().parse::<i64>().unwrap()));
            rest = tail;
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        let value = stream
            .next()
            .unwrap()
            .unwrap_or_else(|err| panic!("{err}: {rest}"));
        rest = &rest[stream.byte_offset()..];
        values.push(value);
    }
    values
}

#[test]
fn on_a_full_disk_a_queued_send_fails_naming_why_and_nothing_is_queued() {
    let out = in_namespace(
        r#"Q first
dd if=/dev/zero of="$STORE_DIR/filler" bs=1k 2>/dev/null
Q "no room for me"
$OUTBOX"#,
    );
    let printed = printed(&out);
    let [first, code_first, refused, code_refused, outbox] = printed.as_slice() else {
        panic!("{out}");
    };
    assert_eq!(
        (first["queued"].clone(), code_first),
        (Value::Bool(true), &Value::from(0))
    );
    assert_ne!(code_refused, &Value::from(0), "{refused}");
    assert!(refused["error"].is_string(), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert_eq!(refused["error"], "store_failed", "{refused}");
    assert!(
        message.contains("post.db") && message.contains("full"),
        "{message}"
    );
    let texts: Vec<&str> = outbox
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|record| record["text"].as_str())
        .collect();
    assert_eq!(texts, ["first"], "nothing more was queued");
}

#[test]
fn on_a_read_only_disk_a_queued_send_fails_naming_why_and_nothing_is_queued() {
    let out = in_namespace(
        r#"Q first
eval "$STOP"
mount -o remount,ro "$STORE_DIR"
Q "read-only"
mount -o remount,rw "$STORE_DIR"
$OUTBOX"#,
    );
    let printed = printed(&out);
    let [first, _, refused, code_refused, outbox] = printed.as_slice() else {
        panic!("{out}");
    };
    assert_eq!(first["queued"], true);
    assert_ne!(code_refused, &Value::from(0), "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("post.db"), "{message}");
    assert!(
        message.to_lowercase().contains("read-only") || message.contains("readonly"),
        "{message}"
    );
    let texts: Vec<&str> = outbox
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|record| record["text"].as_str())
        .collect();
    assert_eq!(texts, ["first"]);
}
