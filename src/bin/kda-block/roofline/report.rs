//! The printed model.

use std::fmt;

use super::{
    Bound, F32_FLOPS, HBM_BYTES_PER_S, LaunchModel, RooflineReport, TENSOR_BF16_FLOPS, TENSOR_TF32_FLOPS,
    TF32_PARTS,
};

/// `value` with an SI prefix and `unit`, four significant digits or so: `67.11 MB`, `275.0 GFLOP`.
fn si(value: f64, unit: &str) -> String {
    let (scaled, prefix) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(scale, _)| value >= *scale)
        .map_or((value, ""), |(scale, prefix)| (value / scale, prefix));
    let digits = if scaled >= 100.0 || prefix.is_empty() { 1 } else { 2 };
    let digits = if prefix.is_empty() { 0 } else { digits };
    format!("{scaled:.digits$} {prefix}{unit}")
}

impl fmt::Display for RooflineReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let measured = self.measured_on.is_some();
        match &self.measured_on {
            None => writeln!(f, "roofline of one layer, model (no device): estimates, nothing measured")?,
            Some(backend) => writeln!(
                f,
                "roofline of one layer, model (estimates) beside each launch of the block on {backend}, timed on its own"
            )?,
        }
        writeln!(f, "layer: {}", self.geometry)?;
        writeln!(
            f,
            "H200 roofs: HBM {:.1} TB/s; {:.0} TFLOPS bf16 tensor cores (gemm, gemm_splitk), {:.0} TFLOPS tf32 \
             tensor cores at {} tf32 products an f32 one (chunk_scan), {:.0} TFLOPS f32 (every other kernel)",
            HBM_BYTES_PER_S / 1e12,
            TENSOR_BF16_FLOPS / 1e12,
            TENSOR_TF32_FLOPS / 1e12,
            TF32_PARTS,
            F32_FLOPS / 1e12
        )?;
        for scenario in &self.scenarios {
            writeln!(f, "\n{}: {} launches", scenario.scenario, scenario.launches.len())?;
            let mut header = format!(
                "  {:>2}  {:14}  {:>16}  {:>11}  {:>12}  {:>11}  bound",
                "#", "kernel", "shape", "bytes", "FLOPs", "roofline µs"
            );
            if measured {
                header.push_str("    measured µs  of roofline");
            }
            writeln!(f, "{header}")?;
            for (index, launch) in scenario.launches.iter().enumerate() {
                write!(
                    f,
                    "  {:>2}  {:14}  {:>16}  {:>11}  {:>12}  {:>11.2}  {}",
                    index + 1,
                    launch.field(),
                    launch.shape(),
                    si(launch.bytes as f64, "B"),
                    si(launch.flops as f64, "FLOP"),
                    launch.time() * 1e6,
                    launch.bound()
                )?;
                if let Some(time) = launch.measured {
                    let seconds = time.as_secs_f64().max(f64::MIN_POSITIVE);
                    let pad = if launch.bound() == Bound::Memory { " " } else { "" };
                    write!(f, "{pad}  {:>13.2}  {:>9.1} %", seconds * 1e6, 100.0 * launch.time() / seconds)?;
                }
                writeln!(f)?;
            }
            let memory: f64 =
                scenario.launches.iter().filter(|l| l.bound() == Bound::Memory).map(LaunchModel::time).sum();
            let total = scenario.time();
            writeln!(
                f,
                "  total: {} moved, {} done, roofline {:.2} µs ({:.2} µs memory-bound, {:.2} µs compute-bound)",
                si(scenario.bytes() as f64, "B"),
                si(scenario.flops() as f64, "FLOP"),
                total * 1e6,
                memory * 1e6,
                (total - memory) * 1e6
            )?;
            let longest: Vec<String> = scenario
                .by_kernel()
                .iter()
                .take(5)
                .map(|(field, time)| {
                    format!(
                        "{field} {:.2} µs ({:.0} %)",
                        time * 1e6,
                        100.0 * time / total.max(f64::MIN_POSITIVE)
                    )
                })
                .collect();
            writeln!(f, "  longest kernels: {}", longest.join(", "))?;
            if measured {
                let matched: Vec<&LaunchModel> =
                    scenario.launches.iter().filter(|launch| launch.measured.is_some()).collect();
                let time: f64 = matched.iter().filter_map(|l| l.measured).map(|t| t.as_secs_f64()).sum();
                let roof: f64 = matched.iter().map(|l| l.time()).sum();
                writeln!(
                    f,
                    "  measured: {:.2} µs in all, {:.1} % of the roofline ({} launches, each on its own)",
                    time * 1e6,
                    100.0 * roof / time.max(f64::MIN_POSITIVE),
                    matched.len()
                )?;
            }
        }
        Ok(())
    }
}
