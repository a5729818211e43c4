//! Terminal sizes, read and set on any terminal fd (a pty's master or slave, or the user's
//! own terminal): what interactive exec sessions resize with.

use std::os::fd::BorrowedFd;

/// Sets a terminal's size in character cells; its foreground process group gets SIGWINCH.
pub fn set_size(terminal: BorrowedFd<'_>, cols: u16, rows: u16) -> std::io::Result<()> {
    crate::sys::set_window_size(terminal, cols, rows)
}

/// A terminal's size in character cells (columns, rows); an error when `terminal` is not one.
pub fn size(terminal: BorrowedFd<'_>) -> std::io::Result<(u16, u16)> {
    crate::sys::window_size(terminal)
}
