//! Reading files that another process keeps writing, without writing back.
//!
//! Reading a file updates its access time: with `relatime`, every read of a file written since
//! the last read does, so a middleware reading a few hundred metric files a round (Storm's CSV
//! reporter appends to each every second) dirtied as many inodes a round, 6 % of its round's CPU
//! measured. `O_NOATIME` skips that; the kernel allows it to the file's owner and to
//! `CAP_FOWNER`, so for anybody else the file is opened as usual.

use std::fs::File;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` for reading without updating its access time where the kernel allows it (the
/// caller owns the file or has `CAP_FOWNER`), else as [`File::open`] does.
pub fn open_without_atime(path: &Path) -> io::Result<File> {
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOATIME).open(path) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => File::open(path),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_file_is_read_with_or_without_the_privilege_to_skip_its_access_time() {
        let path = std::env::temp_dir().join(format!("moirai-os-noatime-{}", std::process::id()));
        std::fs::write(&path, b"1,2\n").unwrap();
        let mut text = String::new();
        open_without_atime(&path).unwrap().read_to_string(&mut text).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, "1,2\n");
        let missing = open_without_atime(&path).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound, "a missing file is an error, not a fallback");
    }
}
