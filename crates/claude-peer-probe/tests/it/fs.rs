//! `OsRegistryFs` and `BoundedRead` against real files: FIFOs, links, devices, sparse and
//! foreign files.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{PermissionsExt as _, symlink};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, SystemTime};

use claude_peer_probe::{
    BoundedRead, FileKind, Links, Opens, OsRegistryFs, ReadError, RegistryFs, SocketDir,
    SocketStatus,
};
use claude_peer_registry::MAX_RECORD_BYTES;
use claude_peer_testkit::process::within;
use rustix::fs::{CWD, FileType, Mode};

fn me() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o644), 0).unwrap();
}

/// Reads on another thread so a regression that blocks fails the test instead of
/// hanging the run.
fn read_record_guarded(path: &Path) -> claude_peer_probe::RecordFile {
    let path = path.to_owned();
    within(Duration::from_secs(60), move || {
        OsRegistryFs::new().read_record(&path)
    })
    .expect("read_record must never block")
    .unwrap()
}

#[test]
fn a_fifo_named_like_a_record_is_reported_without_blocking_or_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("123.json");
    mkfifo(&path);
    let record = read_record_guarded(&path);
    assert_eq!(record.kind, FileKind::Fifo);
    assert!(record.bytes.is_empty(), "nothing is read from a fifo");
    assert_eq!(record.owner, me());
}

#[test]
fn a_symlink_to_dev_zero_is_reported_as_a_symlink_and_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("124.json");
    symlink("/dev/zero", &path).unwrap();
    let record = read_record_guarded(&path);
    assert_eq!(record.kind, FileKind::Symlink);
    assert!(record.bytes.is_empty());
    assert_eq!(record.owner, me());
}

#[test]
fn a_symlink_to_a_regular_record_is_still_only_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target"), b"{\"sessionId\":\"x\"}").unwrap();
    let path = dir.path().join("125.json");
    symlink("target", &path).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.kind, FileKind::Symlink);
    assert!(record.bytes.is_empty());
}

#[test]
fn a_device_opened_directly_is_typed_and_not_read() {
    let record = read_record_guarded(Path::new("/dev/zero"));
    assert_eq!(record.kind, FileKind::CharDevice);
    assert!(record.bytes.is_empty());
}

#[test]
fn a_directory_named_like_a_record_is_typed_and_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("126.json");
    std::fs::create_dir(&path).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.kind, FileKind::Directory);
    assert!(record.bytes.is_empty());
}

#[test]
fn a_1_gib_sparse_file_is_reported_by_size_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("127.json");
    File::create(&path).unwrap().set_len(1 << 30).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.kind, FileKind::Regular);
    assert_eq!(record.size, 1 << 30);
    assert!(
        record.bytes.is_empty(),
        "nothing is read of a file over the limit"
    );
    assert_eq!(record.bytes.capacity(), 0, "not even a buffer is allocated");
}

#[test]
fn a_file_just_over_the_limit_is_reported_by_size_and_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("128.json");
    let data: Vec<u8> = (0..MAX_RECORD_BYTES + 100)
        .map(|i| (i % 251) as u8)
        .collect();
    std::fs::write(&path, &data).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.size, data.len() as u64);
    assert!(
        record.bytes.is_empty(),
        "nothing is read of a file over the limit"
    );
}

#[test]
fn a_file_of_exactly_the_limit_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("129.json");
    let data = vec![b' '; MAX_RECORD_BYTES];
    std::fs::write(&path, &data).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.bytes.len(), MAX_RECORD_BYTES);
}

#[test]
fn an_empty_file_is_a_regular_file_with_no_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("130.json");
    File::create(&path).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.kind, FileKind::Regular);
    assert!(
        record.bytes.is_empty(),
        "a torn write reads as empty, not as an error"
    );
}

#[test]
fn a_small_record_is_read_exactly_with_owner_and_mtime() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("131.json");
    let data = br#"{"pid":131,"sessionId":"3f2c"}"#;
    File::create(&path).unwrap().write_all(data).unwrap();
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.kind, FileKind::Regular);
    assert_eq!(record.bytes, data);
    assert_eq!(record.owner, me());
    let modified = record.modified.expect("an mtime");
    let now = SystemTime::now();
    assert!(modified > now - Duration::from_secs(3600) && modified < now + Duration::from_secs(60));
}

#[test]
fn a_record_owned_by_another_uid_reports_that_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("132.json");
    std::fs::write(&path, b"{}").unwrap();
    let expected = if me() == 0 {
        std::os::unix::fs::chown(&path, Some(12345), None).unwrap();
        12345
    } else {
        // Only root can give a file away; the same-owner path is still checked.
        me()
    };
    let record = OsRegistryFs::new().read_record(&path).unwrap();
    assert_eq!(record.owner, expected);
    assert_eq!(record.bytes, b"{}");
}

#[test]
fn a_missing_record_is_an_error_not_a_record() {
    let dir = tempfile::tempdir().unwrap();
    let err = OsRegistryFs::new()
        .read_record(&dir.path().join("133.json"))
        .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn a_bound_unix_socket_is_present_as_a_socket_with_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("134.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    assert_eq!(
        OsRegistryFs::new().socket_status(&path).unwrap(),
        SocketStatus::Present {
            kind: FileKind::Socket,
            owner: me(),
            dir: Some(SocketDir {
                owner: me(),
                shared: false
            })
        }
    );
}

#[test]
fn a_sockets_directory_is_told_with_its_owner_and_whether_others_may_write_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("138.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    for (mode, shared) in [
        (0o700, false),
        (0o770, true),
        (0o1777, true),
        (0o755, false),
    ] {
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
        let SocketStatus::Present { dir: found, .. } =
            OsRegistryFs::new().socket_status(&path).unwrap()
        else {
            panic!("present");
        };
        assert_eq!(
            found,
            Some(SocketDir {
                owner: me(),
                shared
            }),
            "{mode:o}"
        );
    }
}

#[test]
fn socket_status_reports_other_things_and_absence_by_lstat_only() {
    let dir = tempfile::tempdir().unwrap();
    let fs = OsRegistryFs::new();
    let regular = dir.path().join("135.sock");
    std::fs::write(&regular, b"").unwrap();
    assert_eq!(
        fs.socket_status(&regular).unwrap(),
        SocketStatus::Present {
            kind: FileKind::Regular,
            owner: me(),
            dir: Some(SocketDir {
                owner: me(),
                shared: false
            })
        }
    );

    let sock = dir.path().join("real.sock");
    let _listener = UnixListener::bind(&sock).unwrap();
    let link = dir.path().join("136.sock");
    symlink(&sock, &link).unwrap();
    assert_eq!(
        fs.socket_status(&link).unwrap(),
        SocketStatus::Present {
            kind: FileKind::Symlink,
            owner: me(),
            dir: Some(SocketDir {
                owner: me(),
                shared: false
            })
        },
        "a link to a socket is a link"
    );

    assert_eq!(
        fs.socket_status(&dir.path().join("137.sock")).unwrap(),
        SocketStatus::Missing
    );
}

/// Every entry `list` hands over, with its kind.
fn listed(dir: &Path) -> Vec<(OsString, FileKind)> {
    let fs = OsRegistryFs::new();
    let mut entries = Vec::new();
    fs.list(&fs.open_dir(dir).unwrap(), &mut |name, kind| {
        entries.push((name.to_owned(), kind));
    })
    .unwrap();
    entries
}

#[test]
fn list_types_every_entry_without_following_links() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("1000.json"), b"{}").unwrap();
    mkfifo(&d.join("1001.json"));
    symlink("/dev/zero", d.join("1002.json")).unwrap();
    symlink(d.join("sub"), d.join("1003.json")).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();

    let fs = OsRegistryFs::new();
    let mut entries = listed(d);
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let entry = |name: &str, kind| (OsString::from(name), kind);
    assert_eq!(
        entries,
        [
            entry("1000.json", FileKind::Regular),
            entry("1001.json", FileKind::Fifo),
            entry("1002.json", FileKind::Symlink),
            entry("1003.json", FileKind::Symlink),
            entry("sub", FileKind::Directory),
        ],
        "no . or .., links typed as links"
    );
    let handle = fs.open_dir(d).unwrap();
    for name in ["1000.json", "1001.json", "1002.json", "1003.json", "sub"] {
        assert_eq!(
            fs.read_record_in(&handle, name.as_ref()).unwrap(),
            fs.read_record(&d.join(name)).unwrap(),
            "{name}: read relative to the directory's handle as by its path"
        );
    }
    let missing = fs
        .read_record_in(&handle, "1004.json".as_ref())
        .unwrap_err();
    assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn list_of_an_empty_directory_is_empty_and_of_a_missing_one_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let fs = OsRegistryFs::new();
    assert_eq!(listed(dir.path()), []);
    let err = fs.open_dir(&dir.path().join("missing")).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn dir_status_reports_kind_owner_and_permission_bits() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    std::fs::set_permissions(&sessions, std::fs::Permissions::from_mode(0o720)).unwrap();
    let status = OsRegistryFs::new().dir_status(&sessions).unwrap().unwrap();
    assert_eq!(status.kind, FileKind::Directory);
    assert_eq!(status.owner, me());
    assert_eq!(status.mode, 0o720, "group-writable shows in the bits");
}

#[test]
fn dir_status_of_a_symlink_to_a_directory_is_the_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = dir.path().join("sessions");
    symlink(&real, &link).unwrap();
    let status = OsRegistryFs::new().dir_status(&link).unwrap().unwrap();
    assert_eq!(
        status.kind,
        FileKind::Symlink,
        "a symlinked registry is reported, not followed"
    );
}

#[test]
fn dir_status_of_a_missing_directory_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        OsRegistryFs::new()
            .dir_status(&dir.path().join("sessions"))
            .unwrap(),
        None
    );
}

/// A read of at most `limit` bytes.
fn bounded(limit: u64, links: Links, opens: Opens) -> BoundedRead {
    BoundedRead {
        limit,
        links,
        opens,
    }
}

#[test]
fn a_bounded_read_follows_a_final_link_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("target"), b"{}").unwrap();
    let link = dir.path().join("settings.json");
    symlink("target", &link).unwrap();
    for opens in [Opens::Anything, Opens::RegularFilesOnly] {
        let file = bounded(16, Links::Follow, opens).read(&link).unwrap();
        assert_eq!(
            (file.status.kind, file.bytes),
            (FileKind::Regular, b"{}".to_vec())
        );
        let refused = bounded(16, Links::Refuse, opens).read(&link).unwrap_err();
        assert!(
            matches!(refused, ReadError::Symlink(status) if status.kind == FileKind::Symlink),
            "{opens:?}: {refused:?}"
        );
    }
}

#[test]
fn a_bounded_read_refuses_a_file_over_its_limit_unread_and_reads_one_at_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.json");
    std::fs::write(&path, [b' '; 20]).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let read = bounded(19, Links::Refuse, Opens::RegularFilesOnly);
    match read.read(&path).unwrap_err() {
        ReadError::TooLarge {
            status,
            size,
            limit,
            read,
        } => {
            assert_eq!((status.size, size, limit), (20, 20, 19));
            assert!(
                read.is_empty(),
                "a file over the limit by fstat is not read"
            );
        }
        other => panic!("expected too large, got {other:?}"),
    }
    let file = bounded(20, Links::Refuse, Opens::RegularFilesOnly)
        .read(&path)
        .unwrap();
    assert_eq!(file.bytes.len(), 20);
    assert_eq!((file.status.mode, file.status.owner), (0o640, me()));
}

#[test]
fn regular_files_only_refuses_a_fifo_or_socket_by_its_kind_where_opening_either_would_not() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    let to_fifo = dir.path().join("to-fifo.json");
    symlink(&fifo, &to_fifo).unwrap();
    let sock = dir.path().join("sock.json");
    let _listener = UnixListener::bind(&sock).unwrap();
    let read = bounded(16, Links::Follow, Opens::RegularFilesOnly);
    for (path, kind) in [
        (&fifo, FileKind::Fifo),
        (&to_fifo, FileKind::Fifo),
        (&sock, FileKind::Socket),
    ] {
        let err = read.read(path).unwrap_err();
        assert!(
            matches!(&err, ReadError::NotRegular(status) if status.kind == kind),
            "{}: {err:?}",
            path.display()
        );
    }
    assert!(
        matches!(
            bounded(16, Links::Follow, Opens::Anything).read(&sock),
            Err(ReadError::Io(_))
        ),
        "a socket cannot be opened, so only a look first can say what it is"
    );
}

#[test]
fn a_bounded_read_of_nothing_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let err = bounded(16, Links::Follow, Opens::RegularFilesOnly)
        .read(&dir.path().join("missing.json"))
        .unwrap_err();
    assert!(
        matches!(&err, ReadError::Io(e) if e.kind() == std::io::ErrorKind::NotFound),
        "{err:?}"
    );
}
