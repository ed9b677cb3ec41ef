//! `show`: one session in full, by session id or by the name of one live session.

use claude_peer_resolve::Entry;
use claude_peer_transcript::Summary;

use crate::error::{Exit, Failure};
use crate::json::SessionDetailJson;
use crate::ops::remote::{self, Hosts};
use crate::ops::{Context, sessions};
use crate::output::{Output, host_failed};
use crate::table::{Column, Style, lines, now_ms, session_fields, table};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session id, or the name of exactly one live session
    #[arg(value_name = "SESSION_ID|NAME")]
    target: String,
}

pub(crate) fn exec(ctx: &Context, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let session = out.warned(sessions::find(ctx, &args.target))?;
    let transcript = out.warned(sessions::transcript(ctx, &session));
    if out.is_json() {
        out.json(&SessionDetailJson::new(&session, transcript.as_ref()))?;
    } else {
        out.text(&human_show(&session, transcript.as_ref()))?;
    }
    Ok(Exit::Success)
}

/// `show HOST:TARGET` (or `show TARGET` of the one host asked): that host's `show`, its
/// JSON marked with the host, its words as it printed them.
pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let Some((host, target)) = hosts.target(&args.target) else {
        return Err(Failure::usage(
            "no_host",
            format!(
                "`{}` names none of the hosts asked: write HOST:{0}",
                args.target
            ),
        ));
    };
    let words = ["show".into(), target.into()];
    if out.is_json() {
        return match remote::succeeded(host, hosts.ask(host, &words, b"")) {
            Ok(mut session) => {
                remote::mark(&mut session, host);
                out.json(&session)?;
                Ok(Exit::Success)
            }
            Err(err) => host_failed(out, err),
        };
    }
    let answer = hosts.ask_text(host, &words, b"")?;
    out.text(&lines(&String::from_utf8_lossy(&answer.stdout)))?;
    eprint!("{}", lines(&answer.stderr));
    Ok(Exit::of_host(answer.exit))
}

fn human_show(session: &Entry, transcript: Option<&Summary>) -> String {
    let rows: Vec<Vec<String>> = session_fields(session, transcript, now_ms())
        .into_iter()
        .map(|(field, value)| vec![field.to_owned(), value])
        .collect();
    table(
        &[Column::plain("FIELD"), Column::plain("VALUE")],
        &rows,
        Style::PLAIN,
    )
}
