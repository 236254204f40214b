//! The block's launches recorded on the recording backend at 1, 2 and 3 heads, and extrapolated to the
//! layer's head count.

use kda::block::Glm5NextKdaBlock;
use kda::geometry::KdaGeometry;
use kda::kernels::{Glm5NextKda, Glm5NextKdaEntry};
use kda::weights::HostWeights;
use kda_runtime::DType;
use kda_runtime::record::{RecordedArg, RecordedLaunch, RecordingBackend};
use kda_runtime::signature::ScalarKind;

use super::{LaunchArg, LaunchModel, RooflineError, SAMPLE_HEADS, Scenario};

/// The block at `geometry` on a fresh recording backend carrying the table less `absent`, and the launches of
/// each of `scenarios` on it.
pub fn record(
    geometry: &KdaGeometry,
    scenarios: &[Scenario],
    absent: &[Glm5NextKdaEntry],
) -> Result<Vec<Vec<RecordedLaunch>>, RooflineError> {
    let gpu = absent
        .iter()
        .map(|absent| absent.entry())
        .fold(RecordingBackend::new().with_table::<Glm5NextKda>(), |gpu, entry| {
            gpu.without(entry.module, entry.entry)
        });
    // Synthetic weights: only their lengths matter here, and at 1 to 3 heads they are small.
    let block = Glm5NextKdaBlock::new(&gpu, *geometry, &HostWeights::synthetic(geometry, 0))?;
    scenarios.iter().map(|scenario| scenario.record(&gpu, &block)).collect()
}

/// The table entry a launch of `module::entry` is, if the table has it.
pub(super) fn launched_entry(module: &str, entry: &str) -> Option<Glm5NextKdaEntry> {
    Glm5NextKdaEntry::ALL
        .into_iter()
        .find(|table| table.entry().module == module && table.entry().entry == entry)
}

/// The launches of `runs` (at [`SAMPLE_HEADS`] heads) at `heads` heads: each integer value
/// extrapolated from the first two runs and checked against the third.
pub(super) fn extrapolate(
    scenario: &Scenario,
    runs: [&[RecordedLaunch]; 3],
    heads: u32,
) -> Result<Vec<LaunchModel>, RooflineError> {
    let drift = |run: usize, what: String| RooflineError::Drift {
        scenario: scenario.to_string(),
        heads: SAMPLE_HEADS[run],
        what,
    };
    for (run, launches) in runs.iter().enumerate().skip(1) {
        if launches.len() != runs[0].len() {
            return Err(drift(run, format!("{} launches, not {}", launches.len(), runs[0].len())));
        }
    }
    let at = |h: u32, one: i128, two: i128| one + (i128::from(h) - 1) * (two - one);
    let mut model = Vec::with_capacity(runs[0].len());
    for (index, first) in runs[0].iter().enumerate() {
        let entry = launched_entry(&first.module, &first.entry)
            .ok_or_else(|| RooflineError::UnknownKernel(format!("{}::{}", first.module, first.entry)))?;
        let field = entry.field();
        let params = entry.entry().signature.map_or(&[][..], |signature| signature.params);
        let [one, two, three] = runs.map(|run| &run[index]);
        for (run, other) in [(1, two), (2, three)] {
            if (other.module.as_str(), other.entry.as_str()) != (first.module.as_str(), first.entry.as_str())
                || other.args.len() != first.args.len()
            {
                return Err(drift(
                    run,
                    format!("launch {index} is `{}::{}`, not `{field}`", other.module, other.entry),
                ));
            }
        }
        let mut args = Vec::with_capacity(first.args.len());
        for (position, arg) in one.args.iter().enumerate() {
            let name = params.get(position).map_or("?", |param| param.name);
            let (b, c) = (&two.args[position], &three.args[position]);
            let (values, max) = match sample([arg, b, c]) {
                Some(Sampled::F32(value)) => {
                    args.push(LaunchArg::F32 { name, value });
                    continue;
                }
                Some(Sampled::Buffer { lens, .. }) => (lens, i128::from(u64::MAX)),
                Some(Sampled::Int { values, max }) => (values, max),
                None => {
                    let what = format!(
                        "launch {index} (`{field}`): `{name}` is {arg:?}, {b:?}, {c:?} at 1, 2, 3 heads"
                    );
                    return Err(drift(1, what));
                }
            };
            let [x, y, z] = values;
            let expected = at(SAMPLE_HEADS[2], x, y);
            if expected != z {
                return Err(RooflineError::NotAffine {
                    scenario: scenario.to_string(),
                    index,
                    field,
                    param: name,
                    expected,
                    found: z,
                });
            }
            let value = at(heads, x, y);
            let value = u64::try_from(value).ok().filter(|&v| i128::from(v) <= max).ok_or_else(|| {
                RooflineError::Overflow { scenario: scenario.to_string(), field, param: name, value, heads }
            })?;
            args.push(match sample([arg, b, c]) {
                Some(Sampled::Buffer { dtype, writable, .. }) => {
                    LaunchArg::Buffer { name, dtype, len: value, writable }
                }
                _ => LaunchArg::Int { name, value },
            });
        }
        model.push(LaunchModel::new(entry, args)?);
    }
    Ok(model)
}

/// One argument at the three sample head counts: a buffer of one element type and access, an
/// integer scalar (its values, and the largest its type holds), or an f32 scalar of one value.
enum Sampled {
    Buffer { dtype: DType, writable: bool, lens: [i128; 3] },
    Int { values: [i128; 3], max: i128 },
    F32(f32),
}

/// The argument at the three head counts, if it is of one kind in all three (and an f32 scalar
/// of one value).
fn sample([a, b, c]: [&RecordedArg; 3]) -> Option<Sampled> {
    use RecordedArg::{Buffer, Scalar};
    match (a, b, c) {
        (
            Buffer { dtype, len, writable },
            Buffer { dtype: d2, len: l2, writable: w2 },
            Buffer { dtype: d3, len: l3, writable: w3 },
        ) if (dtype, writable) == (d2, w2) && (dtype, writable) == (d3, w3) => Some(Sampled::Buffer {
            dtype: *dtype,
            writable: *writable,
            lens: [*len, *l2, *l3].map(|l| l as i128),
        }),
        (Scalar(x), Scalar(y), Scalar(z)) if x.kind() == y.kind() && x.kind() == z.kind() => {
            let kind = x.kind();
            if let [Some(x), Some(y), Some(z)] = [x, y, z].map(|scalar| scalar.as_size()) {
                let value = |size: Result<u64, i64>| size.map_or_else(i128::from, i128::from);
                // The kind's largest value: 2^bits - 1, a bit fewer for a signed kind.
                let bits = 8 * kind.size() as u32 - u32::from(kind.is_signed());
                let max = if kind == ScalarKind::Bool { 1 } else { (1i128 << bits) - 1 };
                return Some(Sampled::Int { values: [value(x), value(y), value(z)], max });
            }
            let [x, y, z] = [x, y, z].map(|scalar| scalar.get::<f32>().map(f32::to_bits));
            (x.is_some() && x == y && x == z).then(|| Sampled::F32(f32::from_bits(x.unwrap_or_default())))
        }
        _ => None,
    }
}
