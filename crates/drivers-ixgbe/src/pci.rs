//! Opening a real 82599 on Linux behind the driver's seam ([`hw::Device`]): the PCI
//! address, probing the device in sysfs, and choosing how to reach it.
//!
//! - **VFIO** (the device bound to `vfio-pci`, the IOMMU on): BAR0 and the
//!   configuration space through the VFIO device, DMA memory mapped into the IOMMU at
//!   IOVAs the driver assigns (`vfio.rs`; kernel Documentation/driver-api/vfio.rst).
//! - **sysfs** (the device bound to no driver or to `uio_pci_generic`, no IOMMU
//!   translating for it): BAR0 mapped from `/sys/bus/pci/devices/ADDR/resource0`, bus
//!   mastering set through its `config` file, DMA memory in 2 MiB hugepages addressed
//!   physically (`/proc/self/pagemap`, root only). This is what ixy does; the device
//!   can write anywhere in memory, so it is for test machines.
//!
//! Bus mastering is bit 2 of the PCI command register (PCI Local Bus 3.0 §6.2.2); BAR0
//! of an 82599 holds its registers, at least 128 KiB (the register map, datasheet
//! §8.2). Everything here that needs the hardware (the mappings, the `ioctl`s, DMA)
//! compiles but runs only on a machine with an 82599; the tests (`tests/pci.rs`) cover
//! addresses, probing a fake sysfs tree and this machine's own devices, and every
//! refusal before the hardware is touched.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::hugepages::{self, BusAddresses, HugepageAllocator, HUGEPAGE};
use crate::hw::{self, Registers};
use crate::regs::{CTRL, CTRL_RST};
use crate::sys::{self, Mapping};
use crate::vfio::{self, Container};
use crate::{InitError, IxgbeConfig, BUF_SIZE};

/// Intel's PCI vendor id.
pub const INTEL: u16 = 0x8086;

/// Device ids of the 82599 family's physical functions, as Linux's `ixgbe_type.h`
/// names them (`IXGBE_DEV_ID_82599_*`). The 82599 virtual function (0x10ED) and the
/// X540/X550 have other register maps and are not here.
pub const DEVICE_IDS_82599: [(u16, &str); 16] = [
    (0x10F7, "82599 KX4"),
    (0x1514, "82599 KX4 mezzanine"),
    (0x1517, "82599 KR"),
    (0x151C, "82599 T3 LOM"),
    (0x10F9, "82599 CX4"),
    (0x10FB, "82599 SFP+"),
    (0x152A, "82599 backplane FCoE"),
    (0x1529, "82599 SFP+ FCoE"),
    (0x1507, "82599 SFP+ EM"),
    (0x154D, "82599 SFP+ SF2"),
    (0x1557, "82599EN SFP+"),
    (0x10FC, "82599 XAUI LOM"),
    (0x10F8, "82599 combined backplane"),
    (0x154F, "82599 LS"),
    (0x154A, "82599 SFP+ SF QP"),
    (0x1558, "82599 QSFP+ SF QP"),
];

/// An 82599's BAR0 maps its registers, at least 128 KiB of them (datasheet §8.2);
/// smaller is not one.
pub(crate) const BAR0_MIN: u64 = 128 << 10;

/// The PCI command register (a 16-bit word at offset 4 of the configuration space) and
/// its memory-space and bus-master bits.
const PCI_COMMAND: u64 = 4;
const PCI_COMMAND_MEMORY: u16 = 1 << 1;
const PCI_COMMAND_MASTER: u16 = 1 << 2;

/// The largest ring without an IOMMU: 2 × ring × [`BUF_SIZE`] receive buffer bytes
/// must fit one physically contiguous 2 MiB hugepage.
pub const MAX_RING_WITHOUT_IOMMU: usize = HUGEPAGE / (2 * BUF_SIZE);

/// A PCI address, `domain:bus:device.function` as `lspci -D` and sysfs write it.
// Exhaustive: the four parts of a PCI address, fixed by the PCI specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciAddress {
    /// The PCI domain (segment), 0 on most machines.
    pub domain: u32,
    /// The bus.
    pub bus: u8,
    /// The device (slot), 0..=31.
    pub device: u8,
    /// The function, 0..=7.
    pub function: u8,
}

impl FromStr for PciAddress {
    type Err = PciError;

    /// `0000:03:00.0`, or `03:00.0` for domain 0. Hexadecimal, either case.
    fn from_str(s: &str) -> Result<PciAddress, PciError> {
        let bad = || PciError::BadAddress {
            given: s.to_string(),
        };
        let hex = |t: &str, max_digits: usize| -> Result<u32, PciError> {
            if t.is_empty() || t.len() > max_digits || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(t, 16).map_err(|_| bad())
        };
        let (rest, function) = s.rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match parts.as_slice() {
            [d, b, s] => (hex(d, 8)?, hex(b, 2)?, hex(s, 2)?),
            [b, s] => (0, hex(b, 2)?, hex(s, 2)?),
            _ => return Err(bad()),
        };
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return Err(bad());
        }
        Ok(PciAddress {
            domain,
            bus: bus as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

/// A device of an IOMMU group, and the driver it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    /// Its PCI address (the name sysfs gives it).
    pub addr: String,
    /// Its driver, if any.
    pub driver: Option<String>,
}

/// Why a real 82599 could not be opened. Each message says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PciError {
    /// Not a PCI address.
    BadAddress {
        /// What was given.
        given: String,
    },
    /// No such device in sysfs.
    NoSuchDevice {
        /// The address looked for.
        addr: PciAddress,
    },
    /// The device is something else.
    NotAn82599 {
        /// Its address.
        addr: PciAddress,
        /// Its vendor id.
        vendor: u16,
        /// Its device id.
        device: u16,
        /// What it is, as far as known (`virtio block device`, `an Intel X540`, ...).
        what: String,
        /// The driver it is bound to.
        driver: Option<String>,
        /// Its IOMMU group.
        iommu_group: Option<u32>,
    },
    /// A kernel driver (`ixgbe`, ...) has the device.
    BoundToKernelDriver {
        /// Its address.
        addr: PciAddress,
        /// Its device id (for `new_id`).
        device: u16,
        /// The driver.
        driver: String,
    },
    /// The device is bound to `vfio-pci` but VFIO cannot be used.
    NoVfio {
        /// Its address.
        addr: PciAddress,
        /// Why not, and what to do.
        reason: String,
    },
    /// VFIO refuses the device's IOMMU group: another device in it has a driver.
    IommuGroupNotViable {
        /// The device's address.
        addr: PciAddress,
        /// The group.
        group: u32,
        /// Every device in the group.
        members: Vec<GroupMember>,
    },
    /// The device has no driver, but the IOMMU translates its DMA, so physical
    /// addresses would fault: it has to go through VFIO.
    IommuTranslates {
        /// Its address.
        addr: PciAddress,
        /// Its device id (for `new_id`).
        device: u16,
        /// Its IOMMU group.
        group: u32,
        /// The group's domain type (`DMA`, `DMA-FQ`).
        kind: String,
    },
    /// Without an IOMMU, the ring asked for needs more contiguous memory than a
    /// hugepage.
    RingTooLarge {
        /// Descriptors per ring asked for.
        ring_size: usize,
    },
    /// No free 2 MiB hugepages (needed without an IOMMU).
    NoHugepages {
        /// Free hugepages (`None`: the kernel has no 2 MiB pool).
        free: Option<u64>,
    },
    /// The system refused access; root is needed.
    NotPermitted {
        /// What was refused.
        what: String,
    },
    /// Bringing the device up failed.
    Init(InitError),
    /// Another system error, with the system's words.
    System {
        /// What was being done.
        what: String,
        /// The error.
        error: String,
    },
}

/// The commands that hand `addr` (device id `device`) from its driver to `vfio-pci`.
fn bind_to_vfio(addr: &PciAddress, device: u16, unbind: bool) -> String {
    let mut s = String::new();
    if unbind {
        s += &format!("    echo {addr} > /sys/bus/pci/devices/{addr}/driver/unbind\n");
    }
    s += &format!(
        "    modprobe vfio-pci\n\
         \x20   echo vfio-pci > /sys/bus/pci/devices/{addr}/driver_override\n\
         \x20   echo {addr} > /sys/bus/pci/drivers/vfio-pci/bind\n\
         (or, for every port with this id: echo 8086 {device:04x} > /sys/bus/pci/drivers/vfio-pci/new_id)"
    );
    s
}

impl fmt::Display for PciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PciError::BadAddress { given } => write!(
                f,
                "`{given}` is not a PCI address: expected DDDD:BB:DD.F such as 0000:03:00.0 \
                 (or BB:DD.F for domain 0), as the first column of `lspci -D -d 8086:` shows"
            ),
            PciError::NoSuchDevice { addr } => write!(
                f,
                "there is no PCI device {addr}: list the Intel NICs with `lspci -D -d 8086:` \
                 and give the address in the first column (ixgbe:0000:03:00.0)"
            ),
            PciError::NotAn82599 {
                addr,
                vendor,
                device,
                what,
                driver,
                iommu_group,
            } => {
                write!(
                    f,
                    "{addr} is {what} ({vendor:04x}:{device:04x}), not an Intel 82599; "
                )?;
                match driver {
                    Some(d) => write!(f, "bound to {d}, ")?,
                    None => write!(f, "bound to no driver, ")?,
                }
                match iommu_group {
                    Some(g) => write!(f, "IOMMU group {g}. ")?,
                    None => write!(f, "no IOMMU group. ")?,
                }
                write!(
                    f,
                    "List the Intel NICs with `lspci -D -d 8086:`; an 82599 is 8086:10fb \
                     (SFP+, X520) or another 82599 id"
                )
            }
            PciError::BoundToKernelDriver {
                addr,
                device,
                driver,
            } => write!(
                f,
                "{addr} is bound to the kernel driver {driver}. Hand it to vfio-pci (its \
                 kernel interface goes away):\n{}\nWithout an IOMMU, only unbind it (the \
                 first line) and it is opened through sysfs with hugepages.",
                bind_to_vfio(addr, *device, true)
            ),
            PciError::NoVfio { addr, reason } => write!(
                f,
                "{addr} is bound to vfio-pci, but VFIO cannot be used: {reason}"
            ),
            PciError::IommuGroupNotViable {
                addr,
                group,
                members,
            } => {
                write!(
                    f,
                    "IOMMU group {group} of {addr} is not viable: VFIO needs every device in \
                     the group bound to vfio-pci (or to no driver). The group holds:"
                )?;
                for m in members {
                    match &m.driver {
                        Some(d) if d != "vfio-pci" => write!(
                            f,
                            "\n    {} (bound to {d}: unbind it, or bind it to vfio-pci too)",
                            m.addr
                        )?,
                        Some(d) => write!(f, "\n    {} ({d})", m.addr)?,
                        None => write!(f, "\n    {} (no driver)", m.addr)?,
                    }
                }
                Ok(())
            }
            PciError::IommuTranslates {
                addr,
                device,
                group,
                kind,
            } => write!(
                f,
                "{addr} has no driver, but the IOMMU translates its DMA (group {group}, type \
                 {kind}), so the physical addresses the sysfs path uses would fault. Bind it \
                 to vfio-pci:\n{}",
                bind_to_vfio(addr, *device, false)
            ),
            PciError::RingTooLarge { ring_size } => write!(
                f,
                "rings of {ring_size} descriptors need {} bytes of receive buffers in one \
                 physically contiguous block; without an IOMMU that is one 2 MiB hugepage, so \
                 at most {MAX_RING_WITHOUT_IOMMU} descriptors. Use a smaller ring, or bind \
                 the device to vfio-pci with the IOMMU on",
                2 * ring_size * BUF_SIZE
            ),
            PciError::NoHugepages { free } => {
                match free {
                    Some(_) => write!(f, "no free 2 MiB hugepages")?,
                    None => write!(f, "this kernel has no 2 MiB hugepage pool")?,
                }
                write!(
                    f,
                    "; without an IOMMU the driver's DMA memory is hugepages (about two per \
                     queue). Reserve some: echo 512 > \
                     /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
                )
            }
            PciError::NotPermitted { what } => write!(
                f,
                "{what}: not permitted. Mapping a device's registers and reading physical \
                 addresses from /proc/self/pagemap need root (CAP_SYS_ADMIN)"
            ),
            PciError::Init(e) => write!(f, "{e}"),
            PciError::System { what, error } => write!(f, "{what}: {error}"),
        }
    }
}

impl std::error::Error for PciError {}

impl From<InitError> for PciError {
    fn from(e: InitError) -> Self {
        PciError::Init(e)
    }
}

/// A PCI device as sysfs describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// Its address.
    pub addr: PciAddress,
    /// Vendor id.
    pub vendor: u16,
    /// Device id.
    pub device: u16,
    /// Class code (base class, subclass, programming interface).
    pub class: u32,
    /// The driver it is bound to (the `driver` link's name).
    pub driver: Option<String>,
    /// Its IOMMU group (the `iommu_group` link's name).
    pub iommu_group: Option<u32>,
}

impl PciDevice {
    /// The 82599 model name, if it is one.
    pub fn model_82599(&self) -> Option<&'static str> {
        if self.vendor != INTEL {
            return None;
        }
        DEVICE_IDS_82599
            .iter()
            .find(|(id, _)| *id == self.device)
            .map(|(_, name)| *name)
    }

    /// What the device is, in words, for messages.
    pub fn describe(&self) -> String {
        describe(self.vendor, self.device, self.class)
    }
}

/// Names of what is commonly found where an 82599 was expected.
fn describe(vendor: u16, device: u16, class: u32) -> String {
    if vendor == 0x1af4 {
        // Virtio: transitional ids 0x1000.. and modern ids 0x1040 + the device type
        // (Virtio 1.2 §4.1.2).
        let kind = match device {
            0x1000 => Some(1),
            0x1001 => Some(2),
            0x1002 => Some(5),
            0x1003 => Some(3),
            0x1004 => Some(8),
            0x1005 => Some(4),
            0x1009 => Some(9),
            d if d >= 0x1040 => Some(d - 0x1040),
            _ => None,
        };
        let name = match kind {
            Some(1) => "network",
            Some(2) => "block",
            Some(3) => "console",
            Some(4) => "entropy",
            Some(5) => "memory balloon",
            Some(8) => "SCSI",
            Some(9) => "9P",
            Some(16) => "GPU",
            Some(18) => "input",
            Some(19) => "vsock",
            Some(26) => "file system",
            _ => "",
        };
        return if name.is_empty() {
            "a virtio device".to_string()
        } else {
            format!("a virtio {name} device")
        };
    }
    if vendor == INTEL {
        let family = match device {
            0x10B6 | 0x1508 | 0x10C6 | 0x10C7 | 0x10DB | 0x10C8 | 0x150B | 0x10DD | 0x10EC
            | 0x10F1 | 0x10E1 | 0x10F4 => Some("an Intel 82598 (the 82599's predecessor)"),
            0x10ED => Some("an 82599 virtual function (this driver needs the physical function)"),
            0x1528 | 0x1560 => Some("an Intel X540"),
            0x1563 | 0x15D1 => Some("an Intel X550"),
            0x100E | 0x100F | 0x10D3 | 0x153A | 0x15B8 => Some("an Intel 1 GbE (e1000) NIC"),
            0x1521 | 0x1533 | 0x157B => Some("an Intel 1 GbE (igb) NIC"),
            0x1572 | 0x1583 | 0x1584 | 0x158B => Some("an Intel 700-series (i40e) NIC"),
            0x1592 | 0x1593 | 0x159B => Some("an Intel E810 (ice) NIC"),
            _ => None,
        };
        if let Some(f) = family {
            return f.to_string();
        }
    }
    let what = match class >> 8 {
        0x0100..=0x01FF => "a storage controller",
        0x0200 => "an Ethernet controller",
        0x0280 => "a network controller",
        0x0300..=0x03FF => "a display controller",
        0x0600 => "a host bridge",
        0x0601 => "an ISA bridge",
        0x0604 => "a PCI bridge",
        0x0C03 => "a USB controller",
        _ => "",
    };
    let vendor_name = match vendor {
        INTEL => "Intel",
        0x1af4 => "virtio",
        0x10de => "NVIDIA",
        0x15b3 => "Mellanox",
        0x14e4 => "Broadcom",
        _ => "",
    };
    match (what.is_empty(), vendor_name.is_empty()) {
        (false, false) => format!("{what} from {vendor_name}"),
        (false, true) => what.to_string(),
        (true, false) => format!("a {vendor_name} device of class {class:06x}"),
        (true, true) => format!("a device of class {class:06x}"),
    }
}

/// Where the system's views are: the sysfs root (`/sys`) and the device directory
/// (`/dev`). Tests point them at a fake tree.
#[derive(Debug, Clone)]
pub struct PciHost {
    /// The sysfs root.
    pub sys: PathBuf,
    /// The device directory (for `vfio/vfio` and `vfio/GROUP`).
    pub dev: PathBuf,
}

fn read_hex(path: &Path) -> Result<u32, PciError> {
    let s = std::fs::read_to_string(path).map_err(|e| PciError::System {
        what: format!("reading {}", path.display()),
        error: e.to_string(),
    })?;
    let t = s.trim();
    u32::from_str_radix(t.trim_start_matches("0x"), 16).map_err(|_| PciError::System {
        what: format!("reading {}", path.display()),
        error: format!("`{t}` is not a hexadecimal number"),
    })
}

/// The name of the target of the symbolic link `path` (`.../drivers/ixgbe` → `ixgbe`).
fn link_name(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

pub(crate) fn system(what: impl Into<String>, e: io::Error) -> PciError {
    PciError::System {
        what: what.into(),
        error: e.to_string(),
    }
}

impl PciHost {
    /// This machine: `/sys` and `/dev`.
    pub fn system() -> PciHost {
        PciHost::new("/sys", "/dev")
    }

    /// Another tree (tests).
    pub fn new(sys: impl Into<PathBuf>, dev: impl Into<PathBuf>) -> PciHost {
        PciHost {
            sys: sys.into(),
            dev: dev.into(),
        }
    }

    fn device_dir(&self, addr: &PciAddress) -> PathBuf {
        self.sys.join("bus/pci/devices").join(addr.to_string())
    }

    /// What sysfs says about the device at `addr`.
    pub fn probe(&self, addr: &PciAddress) -> Result<PciDevice, PciError> {
        let dir = self.device_dir(addr);
        if !dir.exists() {
            return Err(PciError::NoSuchDevice { addr: *addr });
        }
        Ok(PciDevice {
            addr: *addr,
            vendor: read_hex(&dir.join("vendor"))? as u16,
            device: read_hex(&dir.join("device"))? as u16,
            class: read_hex(&dir.join("class")).unwrap_or(0),
            driver: link_name(&dir.join("driver")),
            iommu_group: link_name(&dir.join("iommu_group")).and_then(|g| g.parse().ok()),
        })
    }

    /// The devices of IOMMU group `group` and their drivers, sorted by address.
    pub fn group_members(&self, group: u32) -> Vec<GroupMember> {
        let dir = self
            .sys
            .join("kernel/iommu_groups")
            .join(group.to_string())
            .join("devices");
        let mut members: Vec<GroupMember> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| GroupMember {
                addr: e.file_name().to_string_lossy().into_owned(),
                driver: link_name(&e.path().join("driver")),
            })
            .collect();
        members.sort_by(|a, b| a.addr.cmp(&b.addr));
        members
    }

    /// Whether a member of `group` keeps VFIO from taking it: bound to a driver other
    /// than vfio-pci or pci-stub. Bridges (class 0x0604) are allowed whatever their
    /// driver, as the kernel allows them (`vfio_dev_driver_allowed`). The kernel's
    /// `VFIO_GROUP_FLAGS_VIABLE` stays the final word.
    fn group_blockers(&self, group: u32) -> bool {
        self.group_members(group).iter().any(|m| {
            let is_bridge = read_hex(&self.sys.join("bus/pci/devices").join(&m.addr).join("class"))
                .is_ok_and(|c| c >> 8 == 0x0604);
            match m.driver.as_deref() {
                None | Some("vfio-pci") | Some("pci-stub") => false,
                Some(_) => !is_bridge,
            }
        })
    }

    /// The IOMMU domain type of `group` (`identity`, `DMA`, `DMA-FQ`, ...), where the
    /// kernel says (Linux 5.11 and later).
    fn group_type(&self, group: u32) -> Option<String> {
        let path = self
            .sys
            .join("kernel/iommu_groups")
            .join(group.to_string())
            .join("type");
        Some(std::fs::read_to_string(path).ok()?.trim().to_string())
    }

    /// Probe `addr`, check it is an 82599 in a state this driver can open, and open it:
    /// through VFIO when it is bound to vfio-pci, else through sysfs and hugepages.
    /// The device is not touched until every check has passed.
    pub fn device(&self, addr: &str, cfg: &IxgbeConfig) -> Result<hw::Device, PciError> {
        let addr: PciAddress = addr.parse()?;
        let dev = self.probe(&addr)?;
        if dev.model_82599().is_none() {
            return Err(PciError::NotAn82599 {
                addr,
                vendor: dev.vendor,
                device: dev.device,
                what: dev.describe(),
                driver: dev.driver.clone(),
                iommu_group: dev.iommu_group,
            });
        }
        match dev.driver.as_deref() {
            Some("vfio-pci") => self.open_vfio(&dev),
            None | Some("uio_pci_generic") => self.open_sysfs(&dev, cfg),
            Some(other) => Err(PciError::BoundToKernelDriver {
                addr,
                device: dev.device,
                driver: other.to_string(),
            }),
        }
    }

    fn open_vfio(&self, dev: &PciDevice) -> Result<hw::Device, PciError> {
        let addr = dev.addr;
        let Some(group) = dev.iommu_group else {
            return Err(PciError::NoVfio {
                addr,
                reason: "the device has no IOMMU group, so the IOMMU is off: boot with \
                         `intel_iommu=on iommu=pt` (or `amd_iommu=on`), and check `dmesg | \
                         grep -i -e DMAR -e IOMMU`"
                    .into(),
            });
        };
        if self.dev.join(format!("vfio/noiommu-{group}")).exists() {
            return Err(PciError::NoVfio {
                addr,
                reason: format!(
                    "VFIO runs in no-IOMMU mode (/dev/vfio/noiommu-{group}), which this driver \
                     does not use: unbind the device (echo {addr} > \
                     /sys/bus/pci/devices/{addr}/driver/unbind) and it is opened through \
                     sysfs with hugepages"
                ),
            });
        }
        if self.group_blockers(group) {
            return Err(PciError::IommuGroupNotViable {
                addr,
                group,
                members: self.group_members(group),
            });
        }
        let opened = vfio::open(self, dev, group)?;
        let bar = Mapping::shared(
            std::os::fd::AsFd::as_fd(&opened.device),
            opened.bar0.offset,
            opened.bar0.size as usize,
        )
        .map_err(|e| system(format!("mapping BAR0 of {addr} through VFIO"), e))?;
        let session = Arc::new(Session {
            name: addr.to_string(),
            bar,
            config: ConfigSpace {
                file: opened.device,
                offset: opened.config_offset,
            },
            container: Some(opened.container),
            memory: Mutex::new(Vec::new()),
        });
        session.enable()?;
        let dma = HugepageAllocator::new(
            Arc::clone(&session),
            BusAddresses::Iommu {
                next: hugepages::IOVA_BASE,
            },
        );
        log::info!("ixgbe {addr}: opened through VFIO (IOMMU group {group})");
        Ok(hw::Device {
            regs: session,
            dma: Box::new(dma),
            name: addr.to_string(),
        })
    }

    fn open_sysfs(&self, dev: &PciDevice, cfg: &IxgbeConfig) -> Result<hw::Device, PciError> {
        let addr = dev.addr;
        if let Some(group) = dev.iommu_group {
            match self.group_type(group).as_deref() {
                Some(kind @ ("DMA" | "DMA-FQ")) => {
                    return Err(PciError::IommuTranslates {
                        addr,
                        device: dev.device,
                        group,
                        kind: kind.to_string(),
                    })
                }
                Some(_) => {}
                None => log::warn!(
                    "ixgbe {addr}: IOMMU group {group} without a readable type; assuming the \
                     IOMMU passes DMA through (iommu=pt)"
                ),
            }
        }
        if cfg.ring_size > MAX_RING_WITHOUT_IOMMU {
            return Err(PciError::RingTooLarge {
                ring_size: cfg.ring_size,
            });
        }
        match hugepages::free_hugepages(&self.sys) {
            Some(n) if n > 0 => {}
            free => return Err(PciError::NoHugepages { free }),
        }
        let dir = self.device_dir(&addr);
        let open = |name: &str| -> Result<File, PciError> {
            let path = dir.join(name);
            OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| match e.kind() {
                    io::ErrorKind::PermissionDenied => PciError::NotPermitted {
                        what: format!("opening {}", path.display()),
                    },
                    _ => system(format!("opening {}", path.display()), e),
                })
        };
        let resource0 = open("resource0")?;
        let config = open("config")?;
        let pagemap = File::open("/proc/self/pagemap")
            .map_err(|e| system("opening /proc/self/pagemap", e))?;
        check_pagemap(&pagemap)?;
        let len = resource0
            .metadata()
            .map_err(|e| system(format!("the size of {addr}'s resource0"), e))?
            .len();
        if len < BAR0_MIN {
            return Err(PciError::System {
                what: format!("BAR0 of {addr}"),
                error: format!("{len} bytes; an 82599's BAR0 is at least 128 KiB"),
            });
        }
        let bar = Mapping::shared(std::os::fd::AsFd::as_fd(&resource0), 0, len as usize)
            .map_err(|e| system(format!("mapping {}/resource0", dir.display()), e))?;
        let session = Arc::new(Session {
            name: addr.to_string(),
            bar,
            config: ConfigSpace {
                file: config,
                offset: 0,
            },
            container: None,
            memory: Mutex::new(Vec::new()),
        });
        session.enable()?;
        let dma = HugepageAllocator::new(Arc::clone(&session), BusAddresses::Physical { pagemap });
        log::warn!(
            "ixgbe {addr}: opened through sysfs without an IOMMU: the NIC can write to any \
             physical memory"
        );
        Ok(hw::Device {
            regs: session,
            dma: Box::new(dma),
            name: addr.to_string(),
        })
    }
}

/// Refuse early when the kernel hides physical addresses from this process: translate
/// a page of our own.
fn check_pagemap(pagemap: &File) -> Result<(), PciError> {
    let probe = Mapping::anonymous(sys::page_size())
        .map_err(|e| system("mapping a page to probe /proc/self/pagemap", e))?;
    probe.write_u32(0, 1);
    match hugepages::physical_address(pagemap, probe.addr(), sys::page_size()) {
        Ok(_) => Ok(()),
        Err(hugepages::TranslateError::NotPermitted) => Err(PciError::NotPermitted {
            what: "reading physical addresses from /proc/self/pagemap (they read as zero)".into(),
        }),
        Err(e) => Err(PciError::System {
            what: "reading /proc/self/pagemap".into(),
            error: format!("{e:?}"),
        }),
    }
}

/// Where a device's configuration space is read and written: the sysfs `config` file
/// (offset 0) or the VFIO device's config region.
struct ConfigSpace {
    file: File,
    offset: u64,
}

impl ConfigSpace {
    fn command(&self) -> io::Result<u16> {
        let mut b = [0u8; 2];
        self.file.read_exact_at(&mut b, self.offset + PCI_COMMAND)?;
        Ok(u16::from_le_bytes(b))
    }

    fn set_command(&self, value: u16) -> io::Result<()> {
        self.file
            .write_all_at(&value.to_le_bytes(), self.offset + PCI_COMMAND)
    }
}

/// An opened device: its BAR0, configuration space, IOMMU container and the DMA memory
/// given out for it. The registers and every DMA region hold it, so it goes last, and
/// its drop stops the device's DMA (a reset) before that memory is unmapped.
pub(crate) struct Session {
    name: String,
    bar: Mapping,
    config: ConfigSpace,
    container: Option<Arc<Container>>,
    /// Chunks of DMA memory and, behind an IOMMU, their IOVA.
    memory: Mutex<Vec<(Arc<Mapping>, Option<u64>)>>,
}

impl Session {
    /// Memory decoding and bus mastering on, so the device answers BAR0 and may DMA.
    fn enable(&self) -> Result<(), PciError> {
        let what = || {
            format!(
                "enabling bus mastering of {} (PCI command register)",
                self.name
            )
        };
        let cmd = self.config.command().map_err(|e| system(what(), e))?;
        self.config
            .set_command(cmd | PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER)
            .map_err(|e| system(what(), e))
    }

    /// The VFIO container DMA memory is mapped into, if any.
    pub(crate) fn container(&self) -> Option<&Container> {
        self.container.as_deref()
    }

    /// Keep `map` until the device is closed; `iova` is where it is mapped in the IOMMU.
    pub(crate) fn adopt(&self, map: Arc<Mapping>, iova: Option<u64>) {
        let mut m = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        m.push((map, iova));
    }
}

impl Registers for Session {
    fn read(&self, reg: u32) -> u32 {
        self.bar.read_u32(reg as usize)
    }

    fn write(&self, reg: u32, value: u32) {
        self.bar.write_u32(reg as usize, value)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // A global reset stops receive and transmit DMA (§4.6.3.2) before the memory
        // the rings point into is given back; then bus mastering goes off.
        self.write(CTRL, self.read(CTRL) | CTRL_RST);
        let start = Instant::now();
        while self.read(CTRL) & CTRL_RST != 0 && start.elapsed() < Duration::from_millis(100) {
            std::thread::sleep(Duration::from_micros(100));
        }
        if let Ok(cmd) = self.config.command() {
            let _ = self.config.set_command(cmd & !PCI_COMMAND_MASTER);
        }
        if let Some(c) = &self.container {
            let m = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            for (map, iova) in m.iter() {
                if let Some(iova) = iova {
                    if let Err(e) =
                        sys::vfio_unmap_dma(std::os::fd::AsFd::as_fd(&**c), *iova, map.len() as u64)
                    {
                        log::warn!("ixgbe {}: VFIO_IOMMU_UNMAP_DMA: {e}", self.name);
                    }
                }
            }
        }
    }
}
