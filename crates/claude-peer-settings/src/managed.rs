//! The machine's managed settings, read once for every question asked of them: the file
//! and the drop-in documents of the `managed-settings.d` folder beside it, merged as
//! Claude Code merges them (the file first, then the drop-ins in name order, a later
//! document winning per top-level key).
//!
//! Two answers matter here. `crossSessionInbound`, the top layer of the effective policy
//! (an invalid value counts as `refuse`). And the hook switches: Claude Code lets managed
//! settings switch off hooks given with `--settings` (`disableAllHooks`,
//! `allowManagedHooksOnly`: observed with 2.1.332 in `claude -p`, the tools still run), and
//! a sender without its hooks would run unguarded, so it does not start when either is on.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::policy::InboundPolicy;
use crate::store::{inbound_in, parse_doc, read_bytes};

/// The managed settings that keep hooks given with `--settings` from running.
pub const HOOK_SWITCHES: [&str; 2] = ["disableAllHooks", "allowManagedHooksOnly"];
/// The most drop-in documents read from `managed-settings.d`; a folder with more is
/// reported unreadable, none of its documents read.
pub const MAX_DROP_INS: usize = 256;
/// The drop-in folder's name, beside the managed settings file.
const DROP_IN_DIR: &str = "managed-settings.d";

/// A `crossSessionInbound` as a managed settings document writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManagedInbound {
    /// One of the three values.
    Valid(InboundPolicy),
    /// Anything else, as its JSON text; Claude Code counts it as `refuse`.
    Invalid(String),
}

impl ManagedInbound {
    /// What Claude Code does with it: an invalid value in managed settings refuses.
    #[must_use]
    pub fn counts_as(&self) -> InboundPolicy {
        match self {
            ManagedInbound::Valid(policy) => *policy,
            ManagedInbound::Invalid(_) => InboundPolicy::Refuse,
        }
    }
}

/// What one managed settings document says of the settings read here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Held {
    /// Its `crossSessionInbound`, when it sets one.
    pub inbound: Option<ManagedInbound>,
    /// The [`HOOK_SWITCHES`] it turns on.
    pub hooks_off: Vec<&'static str>,
}

/// One managed settings document that exists: the file, a drop-in, or the drop-in folder
/// itself when it cannot be listed.
#[derive(Debug)]
pub struct Document {
    /// Its path.
    pub path: PathBuf,
    /// What it holds, or why it cannot be told (it is then left out of every answer, and
    /// the answers are incomplete).
    pub read: Result<Held, Error>,
}

/// A managed setting that keeps the sender's hooks from running, and where it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksOff {
    /// The managed settings document that sets it.
    pub path: PathBuf,
    /// `disableAllHooks` or `allowManagedHooksOnly`.
    pub setting: &'static str,
}

/// The managed settings file and its drop-ins, as read once.
#[derive(Debug)]
pub struct ManagedSettings {
    /// The managed settings file (normally [`crate::MANAGED_SETTINGS_PATH`]).
    pub file: PathBuf,
    /// Every document there is, in merge order: the file, then the `*.json` of
    /// `managed-settings.d` by name. A missing file is left out.
    pub documents: Vec<Document>,
}

impl ManagedSettings {
    /// Reads the managed settings `file` and the `managed-settings.d/*.json` drop-ins
    /// beside it. Every document is read bounded (16 MiB), following links, and only when
    /// it is a regular file (a FIFO is never opened); nothing here fails as a whole.
    #[must_use]
    pub fn read(file: &Path) -> ManagedSettings {
        let mut documents: Vec<Document> = read_document(file).into_iter().collect();
        match drop_ins(&file.with_file_name(DROP_IN_DIR)) {
            Ok(paths) => documents.extend(paths.iter().filter_map(|path| read_document(path))),
            Err(unlisted) => documents.push(unlisted),
        }
        ManagedSettings {
            file: file.to_owned(),
            documents,
        }
    }

    /// The managed `crossSessionInbound` and the document that sets it: the last one that
    /// does.
    #[must_use]
    pub fn inbound(&self) -> Option<(&Path, &ManagedInbound)> {
        self.held()
            .filter_map(|(path, held)| Some((path, held.inbound.as_ref()?)))
            .last()
    }

    /// Every hook switch found on, with the document that turns it on.
    #[must_use]
    pub fn hooks_off(&self) -> Vec<HooksOff> {
        self.held()
            .flat_map(|(path, held)| {
                held.hooks_off.iter().map(|&setting| HooksOff {
                    path: path.to_owned(),
                    setting,
                })
            })
            .collect()
    }

    /// The documents read.
    pub fn read_documents(&self) -> impl Iterator<Item = &Path> {
        self.held().map(|(path, _)| path)
    }

    /// Why each document that could not be read (or listed) was not: each error names it.
    pub fn unreadable(&self) -> impl Iterator<Item = &Error> {
        self.documents.iter().filter_map(|d| d.read.as_ref().err())
    }

    fn held(&self) -> impl Iterator<Item = (&Path, &Held)> {
        self.documents
            .iter()
            .filter_map(|d| Some((d.path.as_path(), d.read.as_ref().ok()?)))
    }
}

/// The enterprise MCP configuration beside the managed settings `file`
/// (`managed-mcp.json`), when there is one. Claude Code then starts its servers and no
/// other, and refuses `--strict-mcp-config` (2.1.332: "You cannot use
/// --strict-mcp-config when an enterprise MCP config is present").
#[must_use]
pub fn managed_mcp(file: &Path) -> Option<PathBuf> {
    let config = file.with_file_name("managed-mcp.json");
    fs::metadata(&config).is_ok().then_some(config)
}

/// The `*.json` paths in `dir`, in name order (none when there is no such folder), or
/// the folder as a document that cannot be read.
fn drop_ins(dir: &Path) -> Result<Vec<PathBuf>, Document> {
    let unlisted = |error: Error| Document {
        path: dir.to_owned(),
        read: Err(error),
    };
    let listing_error = |source: io::Error| {
        unlisted(Error::Read {
            path: dir.to_owned(),
            source,
        })
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(listing_error(err)),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry.map_err(listing_error)?.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        if paths.len() == MAX_DROP_INS {
            return Err(unlisted(Error::TooManyDropIns {
                dir: dir.to_owned(),
                limit: MAX_DROP_INS,
            }));
        }
        paths.push(path);
    }
    paths.sort();
    Ok(paths)
}

/// The document at `path`; `None` when nothing is there.
fn read_document(path: &Path) -> Option<Document> {
    let read = match read_bytes(path) {
        Ok(None) => return None,
        Ok(Some(bytes)) => held_in(path, &bytes),
        Err(error) => Err(error),
    };
    Some(Document {
        path: path.to_owned(),
        read,
    })
}

fn held_in(path: &Path, bytes: &[u8]) -> Result<Held, Error> {
    let doc = parse_doc(path, bytes)?;
    let inbound = match inbound_in(path, &doc) {
        Ok(policy) => policy.map(ManagedInbound::Valid),
        Err(Error::InvalidValue { value, .. }) => Some(ManagedInbound::Invalid(value)),
        Err(error) => return Err(error),
    };
    let hooks_off = HOOK_SWITCHES
        .into_iter()
        .filter(|key| doc.get(key) == Some("true"))
        .collect();
    Ok(Held { inbound, hooks_off })
}
