//! Which devices an image's code runs on: SASS is binary code for one architecture (and the later
//! minor versions of its major), PTX is compiled by the driver for any device at least as new as
//! its virtual architecture, provided the driver is at least as new as the nvcc that emitted it.

use std::fmt;

/// A compute capability, optionally architecture-specific (`sm_90a`: runs on 9.0 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CudaArch {
    /// The major version: 9 for `sm_90`.
    pub major: u32,
    /// The minor version: 0 for `sm_90`.
    pub minor: u32,
    /// Whether the code uses features of exactly this architecture (`sm_90a`), so it runs on no
    /// other, not even a later minor version.
    pub specific: bool,
}

impl CudaArch {
    /// `sm_<major><minor>`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor, specific: false }
    }

    /// `sm_<major><minor>a`, which runs on exactly that capability.
    pub const fn specific(major: u32, minor: u32) -> Self {
        Self { major, minor, specific: true }
    }

    /// Whether SASS for this architecture runs on a device of capability `device`: the same
    /// major and at least this minor (SASS is compatible forward within a major version only),
    /// or exactly this capability when architecture-specific.
    fn sass_runs_on(self, device: (u32, u32)) -> bool {
        if self.specific {
            device == (self.major, self.minor)
        } else {
            device.0 == self.major && device.1 >= self.minor
        }
    }

    /// Whether PTX for this virtual architecture compiles for a device of capability `device`:
    /// any capability at least this one, or exactly this one when architecture-specific.
    fn ptx_compiles_for(self, device: (u32, u32)) -> bool {
        if self.specific { device == (self.major, self.minor) } else { device >= (self.major, self.minor) }
    }

    /// The architecture under `prefix`: `sm_90a`, `compute_80`.
    fn write(self, f: &mut fmt::Formatter<'_>, prefix: &str) -> fmt::Result {
        let suffix = if self.specific { "a" } else { "" };
        write!(f, "{prefix}_{}{}{suffix}", self.major, self.minor)
    }
}

impl fmt::Display for CudaArch {
    /// `sm_90`, `sm_90a`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "sm")
    }
}

/// The PTX a fatbin embeds, for the driver to compile on devices without matching SASS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PtxImage {
    /// Its virtual architecture (`compute_90`; `specific` for `compute_90a`).
    pub arch: CudaArch,
    /// The PTX ISA version (`.version 9.0`).
    pub isa: (u32, u32),
    /// The CUDA version of the nvcc that emitted it: a driver older than this cannot JIT it.
    pub toolkit: (u32, u32),
}

impl fmt::Display for PtxImage {
    /// `PTX for compute_90 (ISA 9.0, from CUDA 13.0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PTX for ")?;
        self.arch.write(f, "compute")?;
        write!(f, " (ISA {}.{}, from CUDA {}.{})", self.isa.0, self.isa.1, self.toolkit.0, self.toolkit.1)
    }
}

/// What code a fatbin carries: SASS per architecture, PTX for at most one virtual architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageCoverage {
    /// The architectures it carries SASS for.
    pub sass: &'static [CudaArch],
    /// The PTX it carries, if any.
    pub ptx: Option<PtxImage>,
}

impl ImageCoverage {
    /// Whether the image loads on a device of compute capability `device` under a driver that
    /// supports CUDA `driver_cuda` (`cuDriverGetVersion`, as (major, minor)): through SASS that
    /// runs on the device, else through PTX the driver can compile for it.
    pub fn loadable_on(&self, device: (u32, u32), driver_cuda: (u32, u32)) -> Result<(), Incompatibility> {
        if self.sass.iter().any(|arch| arch.sass_runs_on(device)) {
            return Ok(());
        }
        let device_arch = CudaArch::new(device.0, device.1);
        match self.ptx {
            Some(ptx) if ptx.arch.ptx_compiles_for(device) => {
                if driver_cuda >= ptx.toolkit {
                    Ok(())
                } else {
                    Err(Incompatibility::PtxTooNew { device: device_arch, ptx, driver: driver_cuda })
                }
            }
            _ => Err(Incompatibility::NoCode { device: device_arch, image: *self }),
        }
    }
}

impl fmt::Display for ImageCoverage {
    /// `SASS for sm_80, sm_90 and PTX for compute_90 (ISA 9.0, from CUDA 13.0)`, `no code`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((first, rest)) = self.sass.split_first() {
            write!(f, "SASS for {first}")?;
            for arch in rest {
                write!(f, ", {arch}")?;
            }
        }
        match (self.sass.is_empty(), self.ptx) {
            (true, None) => f.write_str("no code"),
            (true, Some(ptx)) => write!(f, "{ptx} only"),
            (false, Some(ptx)) => write!(f, " and {ptx}"),
            (false, None) => f.write_str(" only"),
        }
    }
}

/// Why an image does not load on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Incompatibility {
    /// No SASS runs on the device, and no PTX compiles for it.
    #[error("no SASS for {device} and no PTX it can use: the image carries {image}")]
    NoCode {
        /// The device's architecture.
        device: CudaArch,
        /// What the image carries.
        image: ImageCoverage,
    },
    /// No SASS runs on the device, and the PTX that would compile for it was emitted by a newer
    /// CUDA than the driver supports.
    #[error(
        "no SASS for {device}, and its {ptx} needs a driver for CUDA {}.{} or newer: this driver \
         supports CUDA {}.{}",
        ptx.toolkit.0, ptx.toolkit.1, driver.0, driver.1
    )]
    PtxTooNew {
        /// The device's architecture.
        device: CudaArch,
        /// The PTX the image carries.
        ptx: PtxImage,
        /// The CUDA version the driver supports.
        driver: (u32, u32),
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    // Architectures as consts, so `&[SM90]` is promoted to a `'static` slice.
    const SM90: CudaArch = CudaArch::new(9, 0);
    const SM90A: CudaArch = CudaArch::specific(9, 0);
    const SM80: CudaArch = CudaArch::new(8, 0);
    const SM86: CudaArch = CudaArch::new(8, 6);
    const SM100: CudaArch = CudaArch::new(10, 0);
    const SM100A: CudaArch = CudaArch::specific(10, 0);
    const SM89: CudaArch = CudaArch::new(8, 9);

    /// A driver new enough for any PTX here.
    const NEW_DRIVER: (u32, u32) = (13, 0);

    const fn ptx(arch: CudaArch) -> Option<PtxImage> {
        Some(PtxImage { arch, isa: (9, 0), toolkit: (13, 0) })
    }

    fn sass(archs: &'static [CudaArch]) -> ImageCoverage {
        ImageCoverage { sass: archs, ptx: None }
    }

    #[test]
    fn sass_runs_on_its_architecture_and_later_minors_of_its_major() {
        let sm90 = sass(&[SM90]);
        assert_eq!(sm90.loadable_on((9, 0), NEW_DRIVER), Ok(()));
        for other in [(8, 9), (10, 0), (12, 0)] {
            assert!(matches!(sm90.loadable_on(other, NEW_DRIVER), Err(Incompatibility::NoCode { .. })));
        }
        let sm80 = sass(&[SM80]);
        assert_eq!(sm80.loadable_on((8, 6), NEW_DRIVER), Ok(()));
        assert_eq!(sm80.loadable_on((8, 9), NEW_DRIVER), Ok(()));
        assert!(sm80.loadable_on((7, 5), NEW_DRIVER).is_err());
        // Not backwards: sm_86 SASS does not run on 8.0.
        assert!(sass(&[SM86]).loadable_on((8, 0), NEW_DRIVER).is_err());
    }

    #[test]
    fn architecture_specific_code_runs_on_exactly_its_capability() {
        let sm90a = sass(&[SM90A]);
        assert_eq!(sm90a.loadable_on((9, 0), NEW_DRIVER), Ok(()));
        assert!(sm90a.loadable_on((9, 1), NEW_DRIVER).is_err());
        assert!(sm90a.loadable_on((10, 0), NEW_DRIVER).is_err());
        let compute90a = ImageCoverage { sass: &[], ptx: ptx(SM90A) };
        assert_eq!(compute90a.loadable_on((9, 0), NEW_DRIVER), Ok(()));
        assert!(matches!(compute90a.loadable_on((10, 0), NEW_DRIVER), Err(Incompatibility::NoCode { .. })));
    }

    #[test]
    fn ptx_compiles_for_later_devices_when_the_driver_is_new_enough() {
        let image = ImageCoverage { sass: &[SM80], ptx: ptx(SM80) };
        assert_eq!(image.loadable_on((9, 0), (13, 0)), Ok(()));
        assert_eq!(image.loadable_on((12, 0), (13, 1)), Ok(()));
        let old_driver = image.loadable_on((9, 0), (12, 4));
        let Err(error @ Incompatibility::PtxTooNew { device, ptx: carried, driver: (12, 4) }) = old_driver
        else {
            panic!("{old_driver:?}");
        };
        assert_eq!((device, Some(carried)), (SM90, image.ptx));
        assert_eq!(
            error.to_string(),
            "no SASS for sm_90, and its PTX for compute_80 (ISA 9.0, from CUDA 13.0) needs a driver for \
             CUDA 13.0 or newer: this driver supports CUDA 12.4"
        );
        // SASS that runs needs no JIT, so the driver's age does not matter.
        assert_eq!(image.loadable_on((8, 6), (12, 4)), Ok(()));
        // PTX does not compile for an older device.
        assert!(matches!(image.loadable_on((7, 5), NEW_DRIVER), Err(Incompatibility::NoCode { .. })));
    }

    #[test]
    fn no_usable_code_names_the_device_and_what_the_image_carries() {
        let cases = [
            (ImageCoverage { sass: &[], ptx: None }, "no code"),
            (sass(&[SM90, SM90A]), "SASS for sm_90, sm_90a only"),
            (
                ImageCoverage { sass: &[SM100], ptx: ptx(SM100) },
                "SASS for sm_100 and PTX for compute_100 (ISA 9.0, from CUDA 13.0)",
            ),
            (
                ImageCoverage { sass: &[], ptx: ptx(SM100A) },
                "PTX for compute_100a (ISA 9.0, from CUDA 13.0) only",
            ),
        ];
        for (image, carried) in cases {
            let error = image.loadable_on((8, 9), NEW_DRIVER).unwrap_err();
            assert_eq!(error, Incompatibility::NoCode { device: SM89, image });
            assert_eq!(
                error.to_string(),
                format!("no SASS for sm_89 and no PTX it can use: the image carries {carried}")
            );
        }
    }

    #[test]
    fn architectures_display_as_nvcc_names_them() {
        assert_eq!(CudaArch::new(9, 0).to_string(), "sm_90");
        assert_eq!(CudaArch::specific(9, 0).to_string(), "sm_90a");
        assert_eq!(CudaArch::new(12, 1).to_string(), "sm_121");
        assert!(SM89 < SM90);
    }
}
