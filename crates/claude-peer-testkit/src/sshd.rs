//! Other machines for tests: a real OpenSSH server (`/usr/sbin/sshd`, Debian's
//! `openssh-server`) per host on a loopback port, with keys made for the test, and an
//! `ssh` wrapper that knows them by name.
//!
//! Each host's logins get a home of their own (`HOME`, the XDG directories and so the
//! runtime directory of its `claude-peers`, the Claude home given) and a `PATH` whose
//! `claude-peers` and `claude` are the ones given, through `authorized_keys`
//! `environment=` options. Its processes share this machine's process table and `/tmp`
//! (where Claude Code puts its sockets, with no `XDG_RUNTIME_DIR` as its receivers
//! have none), as sessions of one user on one machine do.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// A few hosts, each its own sshd, and the `ssh` that reaches them
/// ([`Machines::ssh`], for `CLAUDE_PEERS_SSH`).
#[derive(Debug)]
pub struct Machines {
    dir: tempfile::TempDir,
    hosts: Vec<Machine>,
}

/// One host: its server and the home its logins get.
#[derive(Debug)]
pub struct Machine {
    /// The name `ssh` knows it by.
    pub name: String,
    /// Its logins' `HOME`.
    pub home: PathBuf,
    /// Its Claude home (`CLAUDE_CONFIG_DIR`).
    pub claude_home: PathBuf,
    port: u16,
    config: PathBuf,
    server: Option<Child>,
}

/// What a host's logins run.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `claude-peers` on their `PATH`, or none (a host without it).
    pub claude_peers: Option<PathBuf>,
    /// `claude` on their `PATH`.
    pub claude: PathBuf,
}

impl Machines {
    /// Starts one sshd for each `(name, claude_home)`, every login running `programs`.
    ///
    /// # Errors
    ///
    /// When `sshd` or `ssh-keygen` is missing or a server does not start listening.
    pub fn start(hosts: &[(&str, &Path)], programs: &Programs) -> io::Result<Self> {
        if !Path::new(SSHD).exists() {
            return Err(io::Error::other(format!(
                "{SSHD} is missing: the tests of other machines need Debian's openssh-server (apt-get install openssh-server)"
            )));
        }
        let dir = tempfile::tempdir()?;
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))?;
        keygen(&dir.path().join("client_key"))?;
        keygen(&dir.path().join("host_key"))?;
        let host_key = fs::read_to_string(dir.path().join("host_key.pub"))?;
        let client_key = fs::read_to_string(dir.path().join("client_key.pub"))?;
        let user = whoami();
        let mut ssh_config = String::new();
        let mut known_hosts = String::new();
        let mut machines = Vec::new();
        for (name, claude_home) in hosts {
            let machine = Machine::prepare(dir.path(), name, claude_home, programs, &client_key)?;
            let _ = write!(
                ssh_config,
                "Host {name}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  HostKeyAlias {name}\n  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n  LogLevel ERROR\n",
                port = machine.port,
                key = dir.path().join("client_key").display(),
                known = dir.path().join("known_hosts").display(),
            );
            let _ = writeln!(known_hosts, "{name} {}", host_key.trim());
            machines.push(machine);
        }
        fs::write(dir.path().join("ssh_config"), ssh_config)?;
        fs::write(dir.path().join("known_hosts"), known_hosts)?;
        let wrapper = dir.path().join("ssh");
        fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec ssh -F {} \"$@\"\n",
                dir.path().join("ssh_config").display()
            ),
        )?;
        fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))?;
        let mut machines = Self {
            dir,
            hosts: machines,
        };
        for machine in &mut machines.hosts {
            machine.serve()?;
        }
        Ok(machines)
    }

    /// The `ssh` that knows every host by name (for `CLAUDE_PEERS_SSH`).
    #[must_use]
    pub fn ssh(&self) -> PathBuf {
        self.dir.path().join("ssh")
    }

    /// The host called `name`.
    pub fn host(&mut self, name: &str) -> Option<&mut Machine> {
        self.hosts.iter_mut().find(|m| m.name == name)
    }
}

impl Machine {
    fn prepare(
        dir: &Path,
        name: &str,
        claude_home: &Path,
        programs: &Programs,
        client_key: &str,
    ) -> io::Result<Self> {
        let root = dir.join(name);
        let (home, bin) = (root.join("home"), root.join("bin"));
        for place in [&home, &bin] {
            fs::create_dir_all(place)?;
            fs::set_permissions(place, fs::Permissions::from_mode(0o700))?;
        }
        if let Some(claude_peers) = &programs.claude_peers {
            std::os::unix::fs::symlink(claude_peers, bin.join("claude-peers"))?;
        }
        std::os::unix::fs::symlink(&programs.claude, bin.join("claude"))?;
        let env = [
            ("HOME", home.clone()),
            ("CLAUDE_CONFIG_DIR", claude_home.to_owned()),
            ("XDG_STATE_HOME", home.join(".local/state")),
            ("XDG_CACHE_HOME", home.join(".cache")),
            ("XDG_CONFIG_HOME", home.join(".config")),
            (
                "PATH",
                PathBuf::from(format!("{}:/usr/bin:/bin", bin.display())),
            ),
        ];
        let options: Vec<String> = env
            .iter()
            .map(|(var, value)| format!("environment=\"{var}={}\"", value.display()))
            .collect();
        fs::write(
            root.join("authorized_keys"),
            format!("{} {}", options.join(","), client_key),
        )?;
        let port = free_port()?;
        let config = root.join("sshd_config");
        fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {pid}\nAuthorizedKeysFile {keys}\nPubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nPermitUserEnvironment yes\nStrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding no\nX11Forwarding no\nPrintMotd no\nMaxSessions 64\nMaxStartups 64\nLogLevel ERROR\n",
                host_key = dir.join("host_key").display(),
                pid = root.join("sshd.pid").display(),
                keys = root.join("authorized_keys").display(),
            ),
        )?;
        Ok(Self {
            name: name.to_owned(),
            home,
            claude_home: claude_home.to_owned(),
            port,
            config,
            server: None,
        })
    }

    /// Starts its server (again), and waits until it listens.
    ///
    /// # Errors
    ///
    /// When it cannot start or does not listen within 10 s.
    pub fn serve(&mut self) -> io::Result<()> {
        if rustix::process::geteuid().is_root() {
            // Where sshd separates its privileges, as the package's service makes it.
            fs::create_dir_all("/run/sshd")?;
        }
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "sshd for {} did not listen on port {} within 10 s",
                    self.name, self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stops its server and every connection it serves: the host is down.
    pub fn stop(&mut self) {
        let Some(mut server) = self.server.take() else {
            return;
        };
        let listener = server.id();
        for pid in descendants(listener) {
            kill(pid);
        }
        kill(listener);
        let _ = server.wait();
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn keygen(path: &Path) -> io::Result<()> {
    let status = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "claude-peers-test",
            "-f",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ssh-keygen failed: {status}")))
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

fn whoami() -> String {
    let uid = rustix::process::getuid().as_raw();
    fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.get(2) == Some(&uid.to_string().as_str())).then(|| fields[0].to_owned())
            })
        })
        .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "root".to_owned()))
}

/// Every process below `pid`, children before their parents are known gone.
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        let Ok(entries) = fs::read_dir("/proc") else {
            break;
        };
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let stat = fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // The parent is the second field after the command's closing parenthesis.
            let parent_of = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if parent_of == Some(parent) && !found.contains(&child) {
                found.push(child);
                parents.push(child);
            }
        }
    }
    found
}

fn kill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid.cast_signed()) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}
