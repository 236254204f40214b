//! Forwarding for the backends that wrap another: a stream issuing into its device's queue, the
//! launch timer, the capture and the replay recorder each change a few [`GpuBackend`] methods
//! and pass the rest to the backend they wrap. [`forwarded_methods!`] writes the passed ones, so
//! each wrapper states only what it changes, and the one `unsafe` forwarding of
//! `launch_unchecked` is written, with its reason, once.
//!
//! [`GpuBackend`]: crate::GpuBackend

/// The [`GpuBackend`](crate::GpuBackend) methods named, each calling the same method of the
/// wrapped backend `self.$inner` with the same arguments:
/// `forwarded_methods!(gpu: describe, has_module, lookup, is_handle_of);`.
macro_rules! forwarded_methods {
    ($inner:tt: $($method:ident),+ $(,)?) => {
        $($crate::forward::forwarded_methods!(@method $inner $method);)+
    };
    (@method $inner:tt describe) => {
        fn describe(&self) -> String {
            self.$inner.describe()
        }
    };
    (@method $inner:tt has_module) => {
        fn has_module(&self, module: &str) -> bool {
            self.$inner.has_module(module)
        }
    };
    (@method $inner:tt lookup) => {
        fn lookup(
            &self,
            entry: &$crate::KernelEntry,
        ) -> Result<$crate::KernelHandle, $crate::LookupError> {
            self.$inner.lookup(entry)
        }
    };
    (@method $inner:tt is_handle_of) => {
        fn is_handle_of(&self, kernel: $crate::KernelHandle, entry: &$crate::KernelEntry) -> bool {
            self.$inner.is_handle_of(kernel, entry)
        }
    };
    (@method $inner:tt alloc) => {
        fn alloc(&self, dtype: $crate::DType, len: usize) -> Result<$crate::DeviceBuffer, $crate::BackendError> {
            self.$inner.alloc(dtype, len)
        }
    };
    (@method $inner:tt alloc_for_write) => {
        fn alloc_for_write(
            &self,
            dtype: $crate::DType,
            len: usize,
        ) -> Result<$crate::DeviceBuffer, $crate::BackendError> {
            self.$inner.alloc_for_write(dtype, len)
        }
    };
    (@method $inner:tt copy_to_device) => {
        fn copy_to_device(&self, src: &[u8], dst: &mut $crate::DeviceBuffer) -> Result<(), $crate::BackendError> {
            self.$inner.copy_to_device(src, dst)
        }
    };
    (@method $inner:tt upload_const_bytes) => {
        fn upload_const_bytes(
            &self,
            dtype: $crate::DType,
            contents: &[u8],
        ) -> Result<$crate::ConstBuffer, $crate::BackendError> {
            self.$inner.upload_const_bytes(dtype, contents)
        }
    };
    (@method $inner:tt copy_to_host) => {
        fn copy_to_host(&self, src: &$crate::DeviceBuffer, dst: &mut [u8]) -> Result<(), $crate::BackendError> {
            self.$inner.copy_to_host(src, dst)
        }
    };
    (@method $inner:tt copy_on_device) => {
        fn copy_on_device(
            &self,
            src: $crate::View<'_>,
            dst: $crate::ViewMut<'_>,
        ) -> Result<(), $crate::BackendError> {
            self.$inner.copy_on_device(src, dst)
        }
    };
    (@method $inner:tt launch) => {
        fn launch(
            &self,
            kernel: $crate::KernelHandle,
            geometry: $crate::LaunchGeometry,
            args: &mut [$crate::KernelArg<'_>],
        ) -> Result<(), $crate::BackendError> {
            self.$inner.launch(kernel, geometry, args)
        }
    };
    (@method $inner:tt launch_unchecked) => {
        unsafe fn launch_unchecked(
            &self,
            kernel: $crate::KernelHandle,
            geometry: $crate::LaunchGeometry,
            args: &mut [$crate::KernelArg<'_>],
        ) -> Result<(), $crate::BackendError> {
            // SAFETY: the caller upholds `launch_unchecked`'s contract for these arguments, and
            // it is the same contract on the wrapped backend, which receives them unchanged.
            unsafe { self.$inner.launch_unchecked(kernel, geometry, args) }
        }
    };
    (@method $inner:tt synchronize) => {
        fn synchronize(&self) -> Result<(), $crate::BackendError> {
            self.$inner.synchronize()
        }
    };
    (@method $inner:tt time) => {
        fn time(
            &self,
            work: &mut dyn FnMut() -> Result<(), $crate::BackendError>,
        ) -> Result<std::time::Duration, $crate::BackendError> {
            self.$inner.time(work)
        }
    };
    (@method $inner:tt new_stream) => {
        fn new_stream(&self) -> Result<Box<dyn $crate::GpuBackend + '_>, $crate::BackendError> {
            self.$inner.new_stream()
        }
    };
}
pub(crate) use forwarded_methods;
