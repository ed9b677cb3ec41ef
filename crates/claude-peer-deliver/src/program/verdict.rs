//! What a finished run means: the relay's confirmation line, its exit, its words.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use rustix::process::Signal;

use super::run::Run;
use super::stdout::ConfirmationLine;
use crate::{Confirmation, RelayFailure};

impl Run {
    pub(super) fn verdict(self, name: &str) -> Result<Confirmation, RelayFailure> {
        let stderr = self.stderr.stderr_note();
        // Unless it said it did not send, a program that failed may have sent.
        let fail = |what: String| RelayFailure::uncertain(format!("the {name} {what}{stderr}"));
        let Some(status) = self.status else {
            if self.stopped {
                return Err(fail("was stopped by a signal; it was killed".to_owned()));
            }
            return Err(fail(format!(
                "did not finish within {}; it was killed",
                describe_duration(self.timeout)
            )));
        };
        if let Some(signal) = status.signal() {
            let core = if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            };
            return Err(fail(format!(
                "crashed: killed by signal {}{core}",
                signal_name(signal)
            )));
        }
        let reply = self.stdout.confirmation().cloned();
        match (status.code(), reply) {
            (Some(0), Some(ConfirmationLine { sent: true, detail })) => Ok(Confirmation {
                detail,
                ..Confirmation::default()
            }),
            (
                Some(0),
                Some(ConfirmationLine {
                    sent: false,
                    detail,
                }),
            ) => Err(RelayFailure::new(format!(
                "the {name} reported that it did not send: {}{stderr}",
                detail.as_deref().unwrap_or("(no detail)")
            ))),
            (Some(0), None) => {
                let stdin = self
                    .stdin_error
                    .map(|err| format!(" (writing the message to its stdin failed: {err})"))
                    .unwrap_or_default();
                Err(fail(format!(
                    "exited with status 0 but printed no {{\"sent\":true}} line{stdin}; its stdout ended with: {}",
                    self.stdout.excerpt()
                )))
            }
            (Some(code), _) => Err(fail(format!("exited with status {code}"))),
            (None, _) => Err(fail(format!("ended with {status}"))),
        }
    }
}

fn describe_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// `SIGKILL (9)`, or `9` for a signal without a well-known name.
fn signal_name(raw: i32) -> String {
    const NAMES: [(Signal, &str); 15] = [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::TRAP, "SIGTRAP"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
    ];
    NAMES
        .iter()
        .find(|(signal, _)| signal.as_raw() == raw)
        .map_or_else(|| raw.to_string(), |(_, name)| format!("{name} ({raw})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_are_named() {
        assert_eq!(
            signal_name(Signal::KILL.as_raw()),
            format!("SIGKILL ({})", Signal::KILL.as_raw())
        );
        assert_eq!(signal_name(63), "63");
    }
}
