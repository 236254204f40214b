//! `kda census` on folders no one should trust: sources that made its scan quadratic, includes
//! that name a device or leave the folder, and a 16 MiB library. Each census takes time linear in
//! the bytes it reads, and each include it does not read is listed under its file.

use std::path::Path;
use std::time::{Duration, Instant};

use kda_cli::census::Census;

use super::{kda_census, scratch};

/// What one census here may take in a debug build: each takes seconds, and the scans that were
/// quadratic took minutes (`/dev/zero`, 17 seconds and 2.5 GB).
const GENEROUS: Duration = Duration::from_secs(120);

/// The report of `kda census folder args...`, which must succeed within [`GENEROUS`].
fn census_in_time(folder: &Path, args: &[&str]) -> String {
    let started = Instant::now();
    let mut all = vec![folder.to_str().unwrap()];
    all.extend(args);
    let (stdout, stderr, code) = kda_census(&all);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    stdout
}

/// One kernel after a `;`, on the line after the hostile text.
const LAST: &str = "\n;extern \"C\" __global__ void last(int n) {}\n";

#[test]
fn global_tokens_with_no_declaration_cost_linear_time() {
    let folder = scratch("globals");
    // The declaration's prefix was read back to the last `;` from each `__global__`.
    std::fs::write(folder.join("globals.cu"), format!("{}{LAST}", "__global__ ".repeat(100_000))).unwrap();
    let report = census_in_time(&folder, &[]);
    assert!(report.contains("\nglobals.cu\n  last (line 2): stated\n\n1 of 1 stated\n"), "{report}");
}

#[test]
fn macro_calls_left_open_cost_linear_time() {
    let folder = scratch("open-calls");
    // Each `F (` collected its arguments to the end of the source, to find no `)`.
    std::fs::write(folder.join("calls.cu"), format!("#define F(x) x\n{}{LAST}", "F ( ".repeat(100_000)))
        .unwrap();
    let report = census_in_time(&folder, &[]);
    assert!(report.contains("\ncalls.cu\n  last (line 3): stated\n\n1 of 1 stated\n"), "{report}");
}

#[test]
fn an_include_of_dev_zero_is_named_and_not_read() {
    let folder = scratch("dev-zero");
    std::fs::write(folder.join("zero.cu"), "#include \"/dev/zero\"\n").unwrap();
    let report = census_in_time(&folder, &[]);
    assert!(
        report.contains(
            "\nzero.cu\n  #include \"/dev/zero\" (line 1): not read: an absolute path, outside the folder \
             scanned (`--include-dir DIR` reads the headers under DIR)\n"
        ),
        "{report}"
    );
    // Reached through an include folder, it is still no regular file.
    if cfg!(unix) {
        std::fs::write(folder.join("zero.cu"), "#include \"zero\"\n").unwrap();
        let report = census_in_time(&folder, &["--include-dir", "/dev"]);
        assert!(
            report.contains("\n  #include \"zero\" (line 1): not read: not a regular file\n"),
            "{report}"
        );
    }
}

#[test]
#[cfg(unix)]
fn includes_that_leave_the_folder_are_listed_and_include_dirs_are_read() {
    let dir = scratch("escapes");
    let (folder, common) = (dir.join("kernels"), dir.join("common"));
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    std::fs::create_dir_all(&common).unwrap();
    // Outside the folder, a header whose macro would declare a kernel.
    std::fs::write(dir.join("outside.cuh"), "#define OUTSIDE(N) extern \"C\" __global__ void N(int n) {}\n")
        .unwrap();
    std::fs::write(
        common.join("shared.cuh"),
        "#define SHARED(N) extern \"C\" __global__ void N(float* x) {}\n",
    )
    .unwrap();
    std::fs::write(folder.join("sub/inner.cuh"), "#include \"../../outside.cuh\"\n").unwrap();
    std::os::unix::fs::symlink(dir.join("outside.cuh"), folder.join("link.cuh")).unwrap();
    // A FIFO no one writes: reading it would wait for ever.
    let fifo = std::process::Command::new("mkfifo").arg(folder.join("pipe.cuh")).status().unwrap();
    assert!(fifo.success());
    std::fs::write(
        folder.join("main.cu"),
        "#include \"../outside.cuh\"\n#include \"link.cuh\"\n#include \"pipe.cuh\"\n#include \"sub/inner.cuh\"\n\
         #include \"shared.cuh\"\nOUTSIDE(leaked)\nSHARED(from_shared)\n",
    )
    .unwrap();
    let report = census_in_time(&folder, &["--include-dir", common.to_str().unwrap()]);
    let (_, report) = report.split_once('\n').unwrap();
    let outside = "outside the folder scanned (through `..` or a symbolic link)";
    let hint = "(`--include-dir DIR` reads the headers under DIR)";
    assert_eq!(
        report,
        format!(
            "\nlink.cuh\n  cannot be read: {outside}\n\
             \nmain.cu\n  \
             #include \"../outside.cuh\" (line 1): not read: {outside} {hint}\n  \
             #include \"link.cuh\" (line 2): not read: {outside} {hint}\n  \
             #include \"pipe.cuh\" (line 3): not read: not a regular file\n  \
             from_shared (line 7, SHARED): stated\n\
             \nsub/inner.cuh\n  \
             #include \"../../outside.cuh\" (line 1): not read: {outside} {hint}\n\
             \n1 of 1 stated\n\ndrafted entries:\n\n{}",
            kda_cli::census::draft::manifest(
                &Census::with_include_dirs(&folder, std::slice::from_ref(&common)).unwrap()
            )
            .unwrap()
        )
    );
}

/// A kernel library of at most `bytes` written as public ones are: a header from a sibling
/// folder, kernels a macro declares per element type, explicit instantiations of a reduction per
/// block size, and plain kernels with their comments. Its source, and how many kernels it
/// declares.
fn library(bytes: usize) -> (String, usize) {
    let mut source = String::from(
        "// A generated kernel library.\n#include <cstdint>\n#include \"config.cuh\"\n\
         #include \"../common/helpers.cuh\"\n\n\
         #define UNARY_OP(TYPENAME, FN_NAME, FUNC) \\\n\
         extern \"C\" __global__ void FN_NAME(const size_t numel, const TYPENAME *inp, TYPENAME *out) { \\\n\
         \x20   for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < numel; i += blockDim.x * gridDim.x) { \\\n\
         \x20       TYPENAME x = inp[i]; \\\n\
         \x20       out[i] = FUNC; \\\n\
         \x20   } \\\n\
         }\n\n\
         template <int BLOCK>\n__global__ void block_sum(const float *x, float *y, size_t n) {\n\
         \x20   __shared__ float partial[BLOCK];\n\
         \x20   float sum = 0.0f;\n\
         \x20   for (size_t i = threadIdx.x; i < n; i += BLOCK) {\n        sum += x[i];\n    }\n\
         \x20   partial[threadIdx.x] = sum;\n}\n\n",
    );
    let mut kernels = 1;
    for at in 0..500 {
        source.push_str(&format!("UNARY_OP(float, uneg_{at}, -x)\n"));
        kernels += 1;
    }
    for at in 0.. {
        let kernel = if at % 8 == 0 {
            format!(
                "\n// Adds two vectors, kernel {at}.\nextern \"C\" __global__ void add_{at}(const float *__restrict__ a, \
                 const float *__restrict__ b, float *out, unsigned int n) {{\n    unsigned int i = blockIdx.x * \
                 blockDim.x + threadIdx.x;\n    if (i < n) {{\n        out[i] = a[i] + b[i];\n    }}\n}}\n"
            )
        } else {
            format!("template __global__ void block_sum<{at}>(const float *, float *, size_t);\n")
        };
        if source.len() + kernel.len() > bytes {
            break;
        }
        source.push_str(&kernel);
        kernels += 1;
    }
    (source, kernels)
}

#[test]
fn a_16_mib_library_is_read_whole_and_each_kernel_counted() {
    let folder = scratch("16-mib");
    let (source, kernels) = library(16 << 20);
    std::fs::write(folder.join("library.cu"), &source).unwrap();
    let started = Instant::now();
    let report = Census::of(&folder).unwrap().report();
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());
    assert!(report.contains(&format!(": 1 files, {kernels} kernels\n\nlibrary.cu\n  #include \"../common/helpers.cuh\" (line 4): not read: outside the folder scanned")), "{}", &report[..1000]);
    // Every kernel but the template's definition.
    assert!(
        report.contains(&format!("\n{} of {kernels} stated\n", kernels - 1)),
        "{}",
        &report[report.len() - 1000..]
    );
    assert!(kernels > 150_000, "{kernels}");
}
