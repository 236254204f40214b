//! The example binary as a user runs it: where there is no GPU it says why and exits 0, and
//! `--require-gpu` makes that an error; where there is one, both runs launch on the engine's slices,
//! match the host and show the refused launch.

use std::process::Command;

use kda_runtime::cuda::CudaBackend;

/// The binary's exit code, stdout and stderr, run with `args`.
fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_kda-example-cudarc-interop")).args(args).output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).unwrap();
    (output.status.code(), text(output.stdout), text(output.stderr))
}

#[test]
fn it_runs_on_a_gpu_or_says_why_not() {
    let gpu_here = CudaBackend::device_count().is_ok_and(|count| count > 0);
    for args in [&[][..], &["--require-gpu"]] {
        let (code, stdout, stderr) = run(args);
        if gpu_here {
            assert_eq!(code, Some(0), "{args:?}: {stderr}");
            assert!(stdout.contains("match the host"), "{args:?}: {stdout}");
            assert!(stdout.contains("one element short, refused:"), "{args:?}: {stdout}");
        } else if args.is_empty() {
            assert_eq!(code, Some(0), "{stderr}");
            assert!(stdout.starts_with("not run: CUDA is unavailable"), "{stdout}");
        } else {
            assert_eq!(code, Some(1), "{stdout}");
            assert!(stderr.starts_with("error: CUDA is unavailable"), "{stderr}");
        }
    }
}

#[test]
fn an_unknown_argument_is_a_usage_error() {
    let (code, stdout, stderr) = run(&["--gpu"]);
    assert_eq!((code, stdout.as_str()), (Some(2), ""));
    assert!(stderr.starts_with("usage: kda-example-cudarc-interop [--require-gpu]"), "{stderr}");
}
