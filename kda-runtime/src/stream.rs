//! Streams: further queues on one device, opened with [`GpuBackend::new_stream`], so that two
//! batches (or a prefill and a decode step) proceed at once. Buffers stay usable on every stream
//! of their device, ordered by the rule [`GpuBackend::new_stream`] states and [`StreamOrder`]
//! models.
//!
//! [`InOrder`] is the stream a backend gets by default: its own queue again, for backends whose
//! launches and copies run to completion, in issue order, before the call returns.

mod order;

pub(crate) use order::StreamOrder;

use crate::{BackendError, GpuBackend};

/// The default stream of a backend `B`: every call goes to `B`, so the stream issues into `B`'s
/// own queue. Issue order is then the order the ordering rule asks for, on any backend; nothing
/// overlaps, which costs nothing where every launch runs to completion before it returns.
pub(crate) struct InOrder<'a, B: ?Sized>(pub(crate) &'a B);

impl<B: GpuBackend + ?Sized> GpuBackend for InOrder<'_, B> {
    crate::forward::forwarded_methods!(
        0: describe,
        has_module,
        lookup,
        is_handle_of,
        alloc,
        alloc_for_write,
        copy_to_device,
        upload_const_bytes,
        copy_to_host,
        copy_on_device,
        launch,
        launch_unchecked,
        synchronize,
        time,
    );

    /// Another stream of `B` (into the same queue, unless `B` opens queues of its own).
    fn new_stream(&self) -> Result<Box<dyn GpuBackend + '_>, BackendError> {
        self.0.new_stream()
    }
}

#[cfg(test)]
mod tests {
    use crate::cpu::CpuBackend;
    use crate::fixtures::AXPY;
    use crate::{BackendError, DType, DeviceBuffer, GpuBackend, GpuBackendExt, KernelHandle, LaunchGeometry};

    /// `y += 2·x` with `axpy` on `gpu`, over four elements.
    fn axpy_on(gpu: &dyn GpuBackend, axpy: KernelHandle, x: &DeviceBuffer, y: &mut DeviceBuffer) {
        let args = &mut [x.view().into(), y.view_mut().into(), 4u32.into(), 2f32.into()];
        gpu.launch(axpy, LaunchGeometry::linear(4, 128), args).unwrap();
    }

    #[test]
    fn a_cpu_stream_takes_the_backends_handles_and_buffers_and_computes_the_same() {
        let gpu = CpuBackend::new().with_kernel(&AXPY, |mut args| {
            let (x, n, a) = (args.const_f32(0)?, args.u32(2)? as usize, args.f32(3)?);
            let y = args.mut_f32(1)?;
            y.iter_mut().zip(x).take(n).for_each(|(y, x)| *y += a * x);
            Ok(())
        });
        let axpy = gpu.lookup(&AXPY).unwrap();
        let x = gpu.upload(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut on_parent = gpu.upload(&[1.0f32; 4]).unwrap();
        axpy_on(&gpu, axpy, &x, &mut on_parent);

        let stream = gpu.new_stream().unwrap();
        assert_eq!(stream.lookup(&AXPY).unwrap(), axpy, "one device, one handle");
        // The parent's handle and input on the stream, into a buffer the stream allocated.
        let mut on_stream = stream.upload(&[1.0f32; 4]).unwrap();
        axpy_on(&*stream, axpy, &x, &mut on_stream);
        stream.synchronize().unwrap();
        assert_eq!(stream.download::<f32>(&on_stream).unwrap(), [3.0, 5.0, 7.0, 9.0]);
        // Each backend reads the other's buffer.
        assert_eq!(gpu.download::<f32>(&on_stream).unwrap(), gpu.download::<f32>(&on_parent).unwrap());
        assert_eq!(stream.download::<f32>(&on_parent).unwrap(), [3.0, 5.0, 7.0, 9.0]);
        // A stream of the stream is the same device again.
        axpy_on(&*stream.new_stream().unwrap(), axpy, &x, &mut on_parent);
        assert_eq!(gpu.download::<f32>(&on_parent).unwrap(), [5.0, 9.0, 13.0, 17.0]);
    }

    /// The CPU backend, except that memory a kernel is to write whole comes poisoned (0xAB), as
    /// the emulator poisons it with NaN.
    struct Poisoning(CpuBackend);

    impl GpuBackend for Poisoning {
        crate::forward::forwarded_methods!(
            0: describe,
            has_module,
            lookup,
            is_handle_of,
            alloc,
            copy_to_device,
            copy_to_host,
            copy_on_device,
            launch,
            launch_unchecked,
            synchronize,
        );

        fn alloc_for_write(&self, dtype: DType, len: usize) -> Result<DeviceBuffer, BackendError> {
            let mut buffer = self.0.alloc(dtype, len)?;
            self.0.copy_to_device(&vec![0xAB; buffer.byte_len()], &mut buffer)?;
            Ok(buffer)
        }
    }

    #[test]
    fn a_stream_allocates_as_its_backend_does() {
        let gpu = Poisoning(CpuBackend::new());
        let stream = gpu.new_stream().unwrap();
        let poisoned = stream.alloc_for_write(DType::F32, 4).unwrap();
        let mut bytes = vec![0; poisoned.byte_len()];
        stream.copy_to_host(&poisoned, &mut bytes).unwrap();
        assert_eq!(bytes, [0xAB; 16], "the stream's write-first memory is not its backend's");
        assert_eq!(stream.download::<f32>(&stream.zeros::<f32>(2).unwrap()).unwrap(), [0.0; 2]);
    }
}
