//! The emulation loader of the [module cache](crate::modules): a module is its entries' libraries,
//! opened together on the first lookup of one of them; an entry's kernel is checked against the
//! entry's signature by the parameter types its library reports.

use std::sync::Arc;

use kda_emu::library::{EntryIndex, Library};

use crate::modules::{LoadError, ModuleLoader};
use crate::signature::{Access, ParamKind};
use crate::{EmulatedModule, EmulatedSet, KernelEntry, LookupError, Signature};

/// Opens emulated libraries.
pub(super) struct EmuLoader;

/// A module's open libraries, one per entry.
pub(super) struct EmuModule {
    libraries: Vec<(&'static str, Arc<Library>)>,
}

/// One kernel ready to launch: its library and its index there.
#[derive(Clone)]
pub(super) struct EmuFunction {
    pub library: Arc<Library>,
    pub index: EntryIndex,
    /// The kernel's parameter types, for launches without a signature.
    pub params: Arc<[String]>,
}

/// What the emulator stands for, in messages.
pub(super) const DEVICE: &str = "the CUDA emulator (kernels as C++ on host threads)";

impl ModuleLoader for EmuLoader {
    type Set = EmulatedSet;
    type Module = EmuModule;
    type Function = EmuFunction;

    fn device(&self) -> &str {
        DEVICE
    }

    fn load(&self, module: &'static EmulatedModule) -> Result<EmuModule, LoadError> {
        let libraries = module
            .libraries
            .iter()
            .map(|library| {
                // SAFETY: the path is one the emulated build wrote, as `EmulatedSet::new`'s
                // caller guaranteed: an emulated library, whose initialisers only register its
                // kernel.
                unsafe { Library::open(library.path) }.map(|open| (library.entry, Arc::new(open))).map_err(
                    |message| LoadError::Driver {
                        operation: format!(
                            "opening the emulated `{}::{}` ({})",
                            module.module, library.entry, library.path
                        ),
                        message,
                    },
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(EmuModule { libraries })
    }

    fn function(&self, module: &EmuModule, entry: &KernelEntry) -> Result<EmuFunction, LookupError> {
        let Some((_, library)) = module.libraries.iter().find(|(name, _)| *name == entry.entry) else {
            return Err(LookupError::entry_not_in_module(entry));
        };
        let index = library.find(entry.entry).ok_or_else(|| LookupError::entry_not_in_module(entry))?;
        let params: Arc<[String]> = library.params(index).into();
        if let Some(signature) = entry.signature {
            // A library built from other sources than the manifest describes fails here, at
            // resolve, instead of reading its arguments as the wrong types at launch.
            compare(signature, &params)
                .map_err(|reason| LookupError::SignatureMismatch { entry: Box::new(*entry), reason })?;
        }
        Ok(EmuFunction { library: Arc::clone(library), index, params })
    }
}

/// The C spelling of a parameter, as the emulator's runtime reports it: `const bf16*`, `u32`.
pub(super) fn c_type(kind: &ParamKind) -> String {
    match kind {
        ParamKind::Buffer { dtype, access: Access::Read, .. } => format!("const {dtype}*"),
        ParamKind::Buffer { dtype, access: Access::Write, .. } => format!("{dtype}*"),
        ParamKind::Scalar(scalar) => scalar.name().to_owned(),
    }
}

/// Whether the kernel's parameter types are the signature's, exactly and in order.
fn compare(signature: &Signature, params: &[String]) -> Result<(), String> {
    if signature.params.len() != params.len() {
        return Err(format!(
            "the emulated kernel takes {} parameters ({}), the signature declares {}",
            params.len(),
            params.join(", "),
            signature.params.len()
        ));
    }
    for (param, found) in signature.params.iter().zip(params) {
        let expected = c_type(&param.kind);
        if expected != *found {
            return Err(format!(
                "parameter `{}` is `{found}` in the kernel, `{expected}` in the signature",
                param.name
            ));
        }
    }
    Ok(())
}
