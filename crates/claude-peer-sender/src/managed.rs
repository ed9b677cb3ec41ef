//! What the machine's managed settings say of the hooks that guard the sender.
//!
//! Claude Code lets managed settings switch off hooks given with `--settings`
//! (`disableAllHooks`, `allowManagedHooksOnly`: observed with 2.1.332 in `claude -p`, the
//! tools still run). A sender without its hooks would run unguarded, so it does not start
//! when either is set; the canary of every send catches what files cannot show.

use std::fs;
use std::path::{Path, PathBuf};

use claude_peer_probe::{BoundedRead, Links, Opens, ReadError};
use serde_json::Value;

/// The managed settings that keep hooks given with `--settings` from running.
pub const HOOK_SWITCHES: [&str; 2] = ["disableAllHooks", "allowManagedHooksOnly"];
/// The largest managed settings document read: 16 MiB.
const MAX_MANAGED_BYTES: u64 = 16 * 1024 * 1024;
/// The most drop-in documents read from `managed-settings.d`.
const MAX_DROP_INS: usize = 256;

/// A managed setting that keeps the sender's hooks from running, and where it is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HooksOff {
    /// The managed settings document that sets it.
    pub path: PathBuf,
    /// `disableAllHooks` or `allowManagedHooksOnly`.
    pub setting: &'static str,
}

/// What the managed settings documents say of hooks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ManagedHooks {
    /// The documents read: the file, then the `*.json` of `managed-settings.d` beside it.
    pub read: Vec<PathBuf>,
    /// Every switch found on.
    pub off: Vec<HooksOff>,
    /// The documents that could not be read or are not JSON, each in words.
    pub unreadable: Vec<String>,
}

/// The enterprise MCP configuration beside the managed settings at `path`
/// (`managed-mcp.json`), when there is one. Claude Code then starts its servers and no
/// other, and refuses `--strict-mcp-config` (2.1.332: "You cannot use
/// --strict-mcp-config when an enterprise MCP config is present").
#[must_use]
pub fn managed_mcp(path: &Path) -> Option<PathBuf> {
    let config = path.with_file_name("managed-mcp.json");
    fs::metadata(&config).is_ok().then_some(config)
}

/// Reads the managed settings at `path` and the drop-in documents of the
/// `managed-settings.d` folder beside it (as Claude Code does), for [`HOOK_SWITCHES`].
#[must_use]
pub fn managed_hooks(path: &Path) -> ManagedHooks {
    let mut found = ManagedHooks::default();
    let drop_ins = path.with_file_name("managed-settings.d");
    let mut documents = vec![path.to_path_buf()];
    if let Ok(entries) = fs::read_dir(&drop_ins) {
        let mut names: Vec<PathBuf> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .take(MAX_DROP_INS)
            .collect();
        names.sort();
        documents.extend(names);
    }
    let read = BoundedRead {
        limit: MAX_MANAGED_BYTES,
        links: Links::Follow,
        opens: Opens::RegularFilesOnly,
    };
    for document in documents {
        let bytes = match read.read(&document) {
            Ok(file) => file.bytes,
            Err(ReadError::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => {
                found
                    .unreadable
                    .push(format!("cannot read `{}`: {err}", document.display()));
                continue;
            }
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(settings) => {
                found.off.extend(
                    HOOK_SWITCHES
                        .into_iter()
                        .filter(|key| settings.get(key) == Some(&Value::Bool(true)))
                        .map(|setting| HooksOff {
                            path: document.clone(),
                            setting,
                        }),
                );
            }
            Err(err) => found
                .unreadable
                .push(format!("`{}` is not JSON: {err}", document.display())),
        }
        found.read.push(document);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn either_switch_in_the_file_or_a_drop_in_is_found_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("managed-settings.json");
        assert_eq!(managed_hooks(&file), ManagedHooks::default());

        fs::write(
            &file,
            r#"{"disableAllHooks":false,"crossSessionInbound":"hold"}"#,
        )
        .unwrap();
        let on = managed_hooks(&file);
        assert_eq!((on.read.len(), on.off.len()), (1, 0), "{on:?}");

        let drop_ins = dir.path().join("managed-settings.d");
        fs::create_dir(&drop_ins).unwrap();
        fs::write(
            drop_ins.join("10-hooks.json"),
            r#"{"allowManagedHooksOnly":true}"#,
        )
        .unwrap();
        fs::write(drop_ins.join("20-broken.json"), "{").unwrap();
        fs::write(drop_ins.join("notes.txt"), r#"{"disableAllHooks":true}"#).unwrap();
        let off = managed_hooks(&file);
        assert_eq!(
            off.off,
            [HooksOff {
                path: drop_ins.join("10-hooks.json"),
                setting: "allowManagedHooksOnly"
            }]
        );
        assert!(
            off.unreadable.len() == 1 && off.unreadable[0].contains("20-broken.json"),
            "{off:?}"
        );
    }
}
