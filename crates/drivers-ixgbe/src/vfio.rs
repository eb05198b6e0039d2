//! Opening an 82599 bound to `vfio-pci`, in the order the kernel's VFIO documentation
//! (Documentation/driver-api/vfio.rst, "VFIO Usage Example") gives: a container, the
//! device's IOMMU group (viable: every device in it bound to VFIO or to nothing) added
//! to it, the type-1 IOMMU set, then the device's file descriptor, from which BAR0 is
//! mapped and the PCI configuration space read and written. DMA memory is mapped into
//! the container's IOMMU by [`crate::hugepages`].

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use crate::pci::{system, PciDevice, PciError, PciHost, BAR0_MIN};
use crate::sys::{self, VfioRegionInfo};

/// A VFIO container with the device's group in it: the IOMMU domain DMA memory is
/// mapped into. The group stays open as long as the container is used (closing it
/// would take the group, and its mappings, out of the container).
pub(crate) struct Container {
    container: OwnedFd,
    _group: OwnedFd,
}

impl AsFd for Container {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.container.as_fd()
    }
}

/// An opened VFIO device.
pub(crate) struct Opened {
    /// Its IOMMU container.
    pub(crate) container: Arc<Container>,
    /// The device file descriptor (BAR0 is mapped from it, config space read through it).
    pub(crate) device: File,
    /// Where BAR0 is in `device`.
    pub(crate) bar0: VfioRegionInfo,
    /// Where the configuration space is in `device`.
    pub(crate) config_offset: u64,
}

/// Open a VFIO node (`/dev/vfio/vfio`, `/dev/vfio/GROUP`) read-write, saying what a
/// failure means; `missing` is the error when the node does not exist.
fn open_node(path: &Path, missing: impl FnOnce() -> PciError) -> Result<OwnedFd, PciError> {
    let shown = path.display();
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => Ok(OwnedFd::from(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(missing()),
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Err(PciError::NotPermitted {
            what: format!("opening {shown} (run as root, or `chown $USER {shown}`)"),
        }),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(system(
            format!("opening {shown} (another process, or another instance, has it open)"),
            e,
        )),
        Err(e) => Err(system(format!("opening {shown}"), e)),
    }
}

/// Open `dev` (bound to `vfio-pci`, in IOMMU group `group`) through VFIO.
pub(crate) fn open(host: &PciHost, dev: &PciDevice, group: u32) -> Result<Opened, PciError> {
    let addr = dev.addr;
    let no_vfio = |reason: String| PciError::NoVfio { addr, reason };
    let container_path = host.dev.join("vfio/vfio");
    let container = open_node(&container_path, || {
        no_vfio(format!(
            "{} does not exist: load VFIO with `modprobe vfio-pci`",
            container_path.display()
        ))
    })?;
    let version =
        sys::vfio_api_version(container.as_fd()).map_err(|e| system("VFIO_GET_API_VERSION", e))?;
    if version != sys::VFIO_API_VERSION {
        return Err(no_vfio(format!(
            "the kernel's VFIO API is version {version}, this driver speaks {}",
            sys::VFIO_API_VERSION
        )));
    }
    let type1 = sys::vfio_check_extension(container.as_fd(), sys::VFIO_TYPE1_IOMMU)
        .map_err(|e| system("VFIO_CHECK_EXTENSION", e))?;
    if !type1 {
        return Err(no_vfio(
            "the kernel offers no type-1 IOMMU to VFIO: turn the IOMMU on (`intel_iommu=on` \
             or `amd_iommu=on` on the kernel command line)"
                .into(),
        ));
    }

    let group_path = host.dev.join(format!("vfio/{group}"));
    let group_fd = open_node(&group_path, || {
        no_vfio(format!(
            "{} does not exist although the device is bound to vfio-pci",
            group_path.display()
        ))
    })?;
    let flags =
        sys::vfio_group_flags(group_fd.as_fd()).map_err(|e| system("VFIO_GROUP_GET_STATUS", e))?;
    if flags & sys::VFIO_GROUP_FLAGS_VIABLE == 0 {
        return Err(PciError::IommuGroupNotViable {
            addr,
            group,
            members: host.group_members(group),
        });
    }
    sys::vfio_group_set_container(group_fd.as_fd(), container.as_fd())
        .map_err(|e| system("VFIO_GROUP_SET_CONTAINER", e))?;
    sys::vfio_set_iommu(container.as_fd(), sys::VFIO_TYPE1_IOMMU)
        .map_err(|e| system("VFIO_SET_IOMMU (type 1)", e))?;

    let device = sys::vfio_device_fd(group_fd.as_fd(), &addr.to_string())
        .map_err(|e| system(format!("VFIO_GROUP_GET_DEVICE_FD for {addr}"), e))?;
    let bar0 = sys::vfio_region_info(device.as_fd(), sys::VFIO_PCI_BAR0_REGION_INDEX)
        .map_err(|e| system("VFIO_DEVICE_GET_REGION_INFO (BAR0)", e))?;
    if bar0.flags & sys::VFIO_REGION_INFO_FLAG_MMAP == 0 || bar0.size < BAR0_MIN {
        return Err(PciError::System {
            what: format!("BAR0 of {addr} through VFIO"),
            error: format!(
                "{} bytes, flags {:#x}: an 82599's BAR0 is mappable and at least 128 KiB",
                bar0.size, bar0.flags
            ),
        });
    }
    let config = sys::vfio_region_info(device.as_fd(), sys::VFIO_PCI_CONFIG_REGION_INDEX)
        .map_err(|e| system("VFIO_DEVICE_GET_REGION_INFO (config space)", e))?;
    Ok(Opened {
        container: Arc::new(Container {
            container,
            _group: group_fd,
        }),
        device: File::from(device),
        bar0,
        config_offset: config.offset,
    })
}
