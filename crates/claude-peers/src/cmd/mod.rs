//! One module per subcommand, as `main` dispatches them. None imports another: what
//! several share lives beside them, in `context`, `view`, `output` and `error`.

pub(crate) mod completions;
pub(crate) mod list;
pub(crate) mod mailbox;
pub(crate) mod mcp;
pub(crate) mod resolve;
pub(crate) mod send;
pub(crate) mod settings;
pub(crate) mod show;
pub(crate) mod watch;
