//! `gpustack completions`: a shell completion script, from the same definitions as the help.

use gpustack::Error;

use crate::stdout;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The shell
    shell: clap_complete::Shell,
}

/// Prints the completion script for `cmd`, the whole command line.
pub(crate) fn run(args: Args, mut cmd: clap::Command) -> Result<u8, Error> {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gpustack", &mut buf);
    let _ = stdout(&String::from_utf8_lossy(&buf));
    Ok(0)
}
