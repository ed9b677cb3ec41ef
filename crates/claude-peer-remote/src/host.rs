//! Which machines: `local`, or an ssh destination as `ssh` takes it, checked so that it
//! can only ever be read as a destination.

use std::fmt;
use std::io::Read;
use std::path::Path;

use crate::Error;

/// A place sessions are asked on: this machine, or one `ssh` reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// This machine, asked in-process.
    Local,
    /// An ssh destination (`dev1`, `ada@box`, `ssh://ada@box:2222`).
    Ssh(String),
}

/// What `--host` takes for this machine.
pub const LOCAL: &str = "local";

/// The longest destination taken: far beyond any host name and user.
const MAX_HOST_BYTES: usize = 255;

/// The hosts file read no further than this.
const MAX_HOSTS_FILE_BYTES: u64 = 64 * 1024;

impl Host {
    /// `text` as a host: `local`, or a destination that cannot be read as an ssh option
    /// (a leading `-`), split by a remote shell (whitespace) or carry control characters.
    ///
    /// # Errors
    ///
    /// [`Error::BadHost`], naming the host and why.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let bad = |why: &'static str| Error::BadHost {
            host: text.to_owned(),
            why,
        };
        if text == LOCAL {
            return Ok(Self::Local);
        }
        if text.is_empty() {
            return Err(bad("it is empty"));
        }
        if text.starts_with('-') {
            return Err(bad("it starts with `-`, which ssh reads as an option"));
        }
        if text.len() > MAX_HOST_BYTES {
            return Err(bad("it is longer than 255 bytes"));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad("it holds whitespace or a control character"));
        }
        if text.contains(['\'', '"', '\\', '`', '$', ';', '|', '&', '<', '>', '(', ')']) {
            return Err(bad("it holds a quote or a shell metacharacter"));
        }
        Ok(Self::Ssh(text.to_owned()))
    }

    /// How it is written: `local` or its destination.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Self::Local => LOCAL,
            Self::Ssh(destination) => destination,
        }
    }

    /// Every host of a hosts file: one destination a line, `#` starting a comment, blank
    /// lines ignored, each host once (first place kept).
    ///
    /// # Errors
    ///
    /// [`Error::HostsFile`] when the file cannot be read, is above 64 KiB or not UTF-8,
    /// or a line is no host (its number and why).
    pub fn read_file(path: &Path) -> Result<Vec<Self>, Error> {
        let fail = |why: String| Error::HostsFile {
            path: path.to_owned(),
            why,
        };
        let file =
            std::fs::File::open(path).map_err(|err| fail(format!("cannot be read: {err}")))?;
        let mut bytes = Vec::new();
        file.take(MAX_HOSTS_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| fail(format!("cannot be read: {err}")))?;
        if bytes.len() as u64 > MAX_HOSTS_FILE_BYTES {
            return Err(fail("is above 64 KiB".to_owned()));
        }
        let text = String::from_utf8(bytes).map_err(|_| fail("is not UTF-8".to_owned()))?;
        let mut hosts = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let host = Self::parse(line).map_err(|err| fail(format!("line {}: {err}", n + 1)))?;
            if !hosts.contains(&host) {
                hosts.push(host);
            }
        }
        Ok(hosts)
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Host;

    #[test]
    fn destinations_as_ssh_takes_them_and_nothing_it_could_read_otherwise() {
        for good in [
            "dev1",
            "ada@box",
            "ada@box.example.org",
            "ssh://ada@box:2222",
            "[::1]",
        ] {
            assert_eq!(Host::parse(good).unwrap(), Host::Ssh(good.to_owned()));
        }
        assert_eq!(Host::parse("local").unwrap(), Host::Local);
        for (bad, why) in [
            ("-oProxyCommand=touch /tmp/x", "option"),
            ("-p2222", "option"),
            ("", "empty"),
            ("box\nother", "whitespace"),
            ("box other", "whitespace"),
            ("box\u{7}", "control"),
            ("box;id", "metacharacter"),
            ("$(id)", "metacharacter"),
        ] {
            let err = Host::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_hosts_file_names_its_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(
            &path,
            "# my machines\ndev1\n\n  ada@box  # the big one\ndev1\nlocal\n",
        )
        .unwrap();
        let hosts = Host::read_file(&path).unwrap();
        let names: Vec<&str> = hosts.iter().map(Host::as_str).collect();
        assert_eq!(names, ["dev1", "ada@box", "local"]);
        std::fs::write(&path, "dev1\n-oProxyCommand=x\n").unwrap();
        let err = Host::read_file(&path).unwrap_err().to_string();
        assert!(err.contains("line 2") && err.contains("hosts"), "{err}");
        let err = Host::read_file(&dir.path().join("absent"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be read"), "{err}");
    }
}
