//! The README against the code it describes: every count it states about the `[glm5next_kda]`
//! table is the manifest's, its table of manifest types is kda-build's, every error it shows is one
//! the tests expect word for word, its sample output fits the table and the preset, its versions
//! are the pinned ones, every relative link leads to a file or folder that exists, and it stays a
//! guide (at most 350 lines).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kda::geometry::KdaGeometry;
use kda::kernels::Glm5NextKdaKernels;
use kda_build::Manifest;
use kda_build::manifest::{DType, ScalarKind};

/// The longest the README may grow: past this it is turning into a lab notebook again.
const MAX_LINES: usize = 350;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn readme() -> String {
    read("README.md")
}

/// The README's lines outside fenced code blocks (the prose, where claims are made), and the
/// fenced blocks, each with its info string (`text`, `toml`, ...).
struct Parts {
    prose: Vec<String>,
    blocks: Vec<(String, Vec<String>)>,
}

fn parts(text: &str) -> Parts {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), Vec::new())),
            (Some(_), Some(_)) => blocks.push(open.take().expect("an open block")),
            (Some((_, lines)), None) => lines.push(line.to_owned()),
            (None, None) => prose.push(line.to_owned()),
        }
    }
    assert!(open.is_none(), "README.md: a code block is never closed");
    Parts { prose, blocks }
}

/// The prose as one line, so that a phrase broken across lines is found whole.
fn joined(prose: &[String]) -> String {
    prose.iter().map(|line| line.trim()).collect::<Vec<_>>().join(" ")
}

/// What the README may state about the KDA table.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    entries: usize,
    required: usize,
    optional: usize,
    modules: usize,
}

fn manifest_counts() -> Counts {
    let manifest = Manifest::parse("kernels.toml", &read("kernels.toml")).expect("kernels.toml parses");
    let table = manifest.tables.iter().find(|table| table.name == "glm5next_kda").expect("[glm5next_kda]");
    let optional = table.entries.iter().filter(|entry| entry.optional).count();
    let modules: BTreeSet<&str> = table.entries.iter().map(|entry| entry.module.as_str()).collect();
    let counts = Counts {
        entries: table.entries.len(),
        required: table.entries.len() - optional,
        optional,
        modules: modules.len(),
    };
    // The derive read the same manifest.
    assert_eq!(counts.entries, Glm5NextKdaKernels::ENTRY_POINTS);
    assert_eq!(counts.required, Glm5NextKdaKernels::REQUIRED_ENTRY_POINTS);
    assert_eq!(counts.optional, Glm5NextKdaKernels::OPTIONAL_ENTRY_POINTS);
    counts
}

/// Every number the prose puts before "entries", "entry points", "kernels", "required",
/// "optional" or "modules", with the word: each is a claim about the KDA table.
fn stated_counts(prose: &str) -> Vec<(usize, &'static str)> {
    let words: Vec<&str> = prose.split_whitespace().collect();
    let mut stated = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let number = word.trim_start_matches(['(', '[']).trim_end_matches([',', '.', ';', ':', ')']);
        let Ok(number) = number.replace(',', "").parse::<usize>() else { continue };
        let next = |k: usize| {
            words.get(i + k).map(|word| word.trim_end_matches([',', '.', ';', ':', ')']).to_lowercase())
        };
        let what = match next(1).as_deref() {
            Some("entries" | "kernels") => "entries",
            Some("entry") if next(2).as_deref() == Some("points") => "entries",
            Some("required") => "required",
            Some("optional") => "optional",
            Some("modules") => "modules",
            _ => continue,
        };
        stated.push((number, what));
    }
    stated
}

fn check_counts(readme: &str, counts: &Counts) -> Result<(), String> {
    let prose = joined(&parts(readme).prose);
    let sentence = format!(
        "{} entries ({} required, {} optional) in {} modules",
        counts.entries, counts.required, counts.optional, counts.modules
    );
    if !prose.contains(&sentence) {
        return Err(format!("README.md does not say \"{sentence}\" (the manifest's counts)"));
    }
    for (number, what) in stated_counts(&prose) {
        let expected = match what {
            "entries" => counts.entries,
            "required" => counts.required,
            "optional" => counts.optional,
            _ => counts.modules,
        };
        if number != expected {
            return Err(format!("README.md says {number} {what}; kernels.toml has {expected}"));
        }
    }
    Ok(())
}

#[test]
fn every_count_of_the_table_is_the_manifests() {
    let counts = manifest_counts();
    check_counts(&readme(), &counts).unwrap();
}

#[test]
fn a_wrong_count_fails_the_check() {
    let counts = manifest_counts();
    let readme = readme();
    let right = format!("{} entries ({} required,", counts.entries, counts.required);
    let wrong = format!("{} entries ({} required,", counts.entries, counts.required + 1);
    assert!(check_counts(&readme.replace(&right, &wrong), &counts).is_err());
    // A stray claim elsewhere in the prose is caught as well.
    let stray = format!("{readme}\nThe table has {} entries.\n", counts.entries + 1);
    let error = check_counts(&stray, &counts).unwrap_err();
    assert!(error.contains(&format!("says {} entries", counts.entries + 1)), "{error}");
}

#[test]
fn the_readme_is_a_guide_of_at_most_350_lines() {
    let lines = readme().lines().count();
    assert!(lines <= MAX_LINES, "README.md has {lines} lines; move detail to docs/ (at most {MAX_LINES})");
}

/// The targets of the Markdown links `[text](target)` that are not web addresses or anchors.
fn relative_links(text: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').expect("a link's target is closed");
        let target = &rest[..end];
        let external =
            ["http://", "https://", "mailto:", "#"].iter().any(|prefix| target.starts_with(prefix));
        if !external {
            links.push(target.split('#').next().unwrap_or_default().to_owned());
        }
    }
    links
}

#[test]
fn every_relative_link_leads_to_a_file_or_folder() {
    let links = relative_links(&readme());
    assert!(links.len() >= 10, "the README links its docs and examples: {links:?}");
    let missing: Vec<&String> = links.iter().filter(|link| !root().join(link.as_str()).exists()).collect();
    assert!(missing.is_empty(), "README.md links to paths that do not exist: {missing:?}");
}

/// Every type the manifest accepts: a new variant fails to compile here until the README's table
/// has it.
#[test]
fn the_table_of_manifest_types_is_kda_builds() {
    let readme = readme();
    let section = readme
        .split("### Manifest types and their C spellings")
        .nth(1)
        .expect("README.md has the section \"Manifest types and their C spellings\"");
    let rows: Vec<Vec<&str>> = section
        .lines()
        .take_while(|line| !line.starts_with('#'))
        .filter(|line| line.starts_with("| `"))
        .map(|line| line.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    let mut names: BTreeSet<&str> = DType::ALL.iter().map(|element| element.name()).collect();
    names.extend(ScalarKind::ALL.iter().map(|scalar| scalar.name()));
    let listed: BTreeSet<&str> = rows.iter().map(|row| row[0].trim_matches('`')).collect();
    assert_eq!(listed, names, "the README's types are the manifest's");
    for row in &rows {
        let name = row[0].trim_matches('`');
        let element = DType::ALL.iter().find(|element| element.name() == name);
        let scalar = ScalarKind::ALL.iter().find(|scalar| scalar.name() == name);
        let c_type =
            element.map(|element| element.c_type()).or(scalar.map(|scalar| scalar.c_type())).unwrap();
        if let (Some(element), Some(scalar)) = (element, scalar) {
            assert_eq!(element.c_type(), scalar.c_type(), "`{name}` is one C type");
        }
        assert!(row[1].starts_with(&format!("`{c_type}`")), "`{name}` is `{c_type}` in C: {row:?}");
        let yes = |present: bool| if present { "yes" } else { "no" };
        assert_eq!(row[2], yes(element.is_some()), "`{name}` as a buffer element: {row:?}");
        assert_eq!(row[3], yes(scalar.is_some()), "`{name}` as a scalar: {row:?}");
    }
}

/// Files whose text holds the messages the tests expect, with Rust's line continuations joined
/// and its escaped quotes unescaped, so that a message written across lines reads as one.
fn expected_messages() -> String {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs" || ext == "stderr") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    for dir in ["kda-macros/tests/ui/fail", "src/reference/tests", "kda-build/src", "kda-build/tests"] {
        walk(&root().join(dir), &mut files);
    }
    let mut corpus = String::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let mut line = line.to_owned();
            while let Some(head) = line.strip_suffix('\\') {
                let head = head.to_owned();
                line = head + lines.next().unwrap_or_default().trim_start();
            }
            corpus.push_str(&line.replace("\\\"", "\""));
            corpus.push('\n');
        }
    }
    corpus
}

#[test]
fn every_error_the_readme_shows_is_one_the_tests_expect() {
    let corpus = expected_messages();
    let samples: Vec<String> = parts(&readme())
        .blocks
        .into_iter()
        .filter(|(info, _)| info == "text")
        .flat_map(|(_, lines)| lines)
        .filter(|line| line.starts_with("error: ") || line.starts_with("`"))
        .map(|line| {
            let message = line.strip_prefix("error: ").unwrap_or(&line);
            // "(…)" stands for the values a refusal lists, which the tests do not spell out.
            message.strip_suffix(" (…)").unwrap_or(message).to_owned()
        })
        .collect();
    assert!(samples.len() >= 6, "the README shows the errors of every stage: {samples:?}");
    for sample in &samples {
        assert!(corpus.contains(sample.as_str()), "no test expects the README's error:\n{sample}");
    }
}

#[test]
fn the_sample_output_fits_the_table_and_the_preset() {
    let readme = readme();
    let manifest = Manifest::parse("kernels.toml", &read("kernels.toml")).unwrap();
    let table = manifest.tables.iter().find(|table| table.name == "glm5next_kda").unwrap();
    let blocks = parts(&readme).blocks;
    let output = blocks
        .iter()
        .find(|(info, lines)| {
            info == "text" && lines.iter().any(|line| line.starts_with("kernel table glm5next_kda"))
        })
        .map(|(_, lines)| lines)
        .expect("the README shows the main job's output");
    let mut resolved = 0;
    for line in output {
        let words: Vec<&str> = line.split_whitespace().collect();
        if let [field, symbol, "resolved"] = words.as_slice() {
            let entry = table.entries.iter().find(|entry| entry.field == *field).expect(field);
            assert_eq!(*symbol, format!("{}::{}", entry.module, entry.entry));
            resolved += 1;
        }
    }
    assert!(resolved >= 2, "{output:?}");
    let mid = KdaGeometry::mid();
    let block = output.iter().find_map(|line| line.strip_prefix("block: ")).expect("the block's line");
    let described = format!("mid ({mid}); prompt ");
    let rest = block.strip_prefix(&described).unwrap_or_else(|| panic!("`{block}` describes `{described}`"));
    let number = |text: &str| -> u64 { text.split_whitespace().next().unwrap().parse().unwrap() };
    let prompt = number(rest);
    let decode = number(rest.split("then ").nth(1).expect("decode steps"));
    let text = output.join("\n");
    let outputs = (prompt + decode) * u64::from(mid.hidden);
    let state = u64::from(mid.heads) * u64::from(mid.head_dim) * u64::from(mid.head_dim);
    assert!(text.contains(&format!("over {outputs} values")), "{prompt} + {decode} tokens of {}", mid.hidden);
    assert!(text.contains(&format!("over {state} values")), "{} heads of {}", mid.heads, mid.head_dim);
    let presets = KdaGeometry::PRESETS.join("|");
    assert!(
        joined(&parts(&readme).prose).contains(&format!("`--preset {presets}`")),
        "the presets: {presets}"
    );
}

#[test]
fn the_example_manifest_is_quoted_as_it_is() {
    let example = read("examples/scale-model/kernels.toml");
    let blocks = parts(&readme()).blocks;
    let quoted = blocks
        .iter()
        .find(|(info, lines)| {
            info == "toml" && lines.first().is_some_and(|line| line.contains("examples/scale-model"))
        })
        .map(|(_, lines)| lines)
        .expect("the README quotes examples/scale-model/kernels.toml");
    for line in quoted.iter().filter(|line| !line.trim().is_empty() && !line.starts_with('#')) {
        assert!(example.lines().any(|own| own == line), "not in examples/scale-model/kernels.toml:\n{line}");
    }
}

/// The word after `after` in the prose, without the punctuation that follows it.
fn word_after<'a>(prose: &'a str, after: &str) -> &'a str {
    let at = prose.find(after).unwrap_or_else(|| panic!("README.md does not say `{after}`"));
    let word = prose[at + after.len()..].split_whitespace().next().unwrap_or_default();
    word.trim_end_matches([',', '.', ';', ')'])
}

#[test]
fn the_versions_are_the_pinned_ones() {
    let prose = joined(&parts(&readme()).prose);
    let toolchain = read("rust-toolchain.toml");
    let channel = toolchain
        .lines()
        .find_map(|line| line.strip_prefix("channel = "))
        .expect("rust-toolchain.toml names its channel")
        .trim_matches('"');
    assert_eq!(word_after(&prose, "`rust-toolchain.toml` ("), channel);
    let cargo = read("Cargo.toml");
    let msrv = cargo
        .lines()
        .find_map(|line| line.strip_prefix("rust-version = "))
        .expect("Cargo.toml names the MSRV")
        .trim_matches('"');
    assert_eq!(word_after(&prose, "the MSRV is "), msrv);
    let install = read("scripts/install-cuda.sh");
    let nvcc = install
        .lines()
        .find_map(|line| line.trim().strip_prefix("nvidia-cuda-nvcc=="))
        .expect("scripts/install-cuda.sh pins nvcc");
    assert_eq!(word_after(&prose, "`scripts/install-cuda.sh` installs the pinned "), nvcc);
}
