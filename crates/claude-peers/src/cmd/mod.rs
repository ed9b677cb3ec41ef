//! One module per subcommand, as `main` dispatches them: each parses its arguments,
//! calls an operation (`ops`) and renders the result (`json`, `table`, `output`). None
//! imports another.

pub(crate) mod completions;
pub(crate) mod doctor;
pub(crate) mod list;
pub(crate) mod log;
pub(crate) mod mailbox;
pub(crate) mod man;
pub(crate) mod mcp;
pub(crate) mod outbox;
pub(crate) mod queue;
pub(crate) mod reply;
pub(crate) mod resolve;
pub(crate) mod send;
pub(crate) mod serve;
pub(crate) mod settings;
pub(crate) mod show;
pub(crate) mod top;
pub(crate) mod watch;
pub(crate) mod whoami;
