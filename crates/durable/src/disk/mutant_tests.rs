//! Tests of `DiskDir`'s private steps that mutation testing
//! (`cargo xtask mutants durable`) found no test for.

use super::*;

#[test]
fn the_open_flags_follow_no_link_and_never_block() {
    // A symbolic link or FIFO swapped in between the `lstat` and the open
    // must neither be followed nor block the open.
    assert_eq!(NO_FOLLOW_NO_BLOCK & libc::O_NOFOLLOW, libc::O_NOFOLLOW);
    assert_eq!(NO_FOLLOW_NO_BLOCK & libc::O_NONBLOCK, libc::O_NONBLOCK);
}

#[test]
fn a_taken_temp_name_is_tried_again_with_the_next_one() {
    let t = tempfile::tempdir().unwrap();
    let dir = DiskDir::new(t.path()).unwrap();
    let mut names = ["a", "a", "b"].into_iter();
    let mut next = || names.next().unwrap_or("z").to_owned();
    assert_eq!(dir.create_temp_with(".x-", &mut next).unwrap(), ".x-a.tmp");
    // "a" is taken now: the second call skips it.
    assert_eq!(dir.create_temp_with(".x-", &mut next).unwrap(), ".x-b.tmp");
    assert_eq!(dir.list().unwrap(), [".x-a.tmp", ".x-b.tmp"]);
}

#[test]
fn a_temp_name_taken_every_time_gives_up_after_the_attempts() {
    let t = tempfile::tempdir().unwrap();
    let dir = DiskDir::new(t.path()).unwrap();
    let mut tries = 0;
    let mut same = || {
        tries += 1;
        "a".to_owned()
    };
    dir.create_temp_with(".x-", &mut same).unwrap();
    let e = dir.create_temp_with(".x-", &mut same).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("after 16 tries"), "{e}");
    assert_eq!(tries, 1 + TEMP_ATTEMPTS);
}

#[test]
fn an_error_other_than_a_taken_name_stops_create_temp_at_once() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("state");
    let dir = DiskDir::new(&path).unwrap();
    fs::remove_dir(&path).unwrap();
    let mut tries = 0;
    let e = dir
        .create_temp_with(".x-", &mut || {
            tries += 1;
            format!("n{tries}")
        })
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
    assert_eq!(tries, 1);
}
