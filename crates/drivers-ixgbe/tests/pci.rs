//! Opening a real 82599: addresses, probing, and every refusal before the hardware is
//! touched, against a fake sysfs tree in a temp dir and this machine's own `/sys`. What
//! needs an 82599 (the mappings, VFIO's ioctls, DMA) cannot run here.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use rusty_drivers_ixgbe::pci::{GroupMember, PciAddress, PciDevice, PciError, PciHost, INTEL};
use rusty_drivers_ixgbe::IxgbeConfig;

/// A fake sysfs and /dev under a temp dir, removed on drop.
struct Fake {
    root: PathBuf,
}

impl Fake {
    fn new(tag: &str) -> Fake {
        let root = std::env::temp_dir().join(format!("rusty-pci-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).expect("temp dir");
        std::fs::create_dir_all(root.join("dev")).expect("temp dir");
        Fake { root }
    }

    fn host(&self) -> PciHost {
        PciHost::new(self.root.join("sys"), self.root.join("dev"))
    }

    fn sys(&self, p: &str) -> PathBuf {
        self.root.join("sys").join(p)
    }

    fn device(
        &self,
        addr: &str,
        id: (u16, u16),
        class: u32,
        driver: Option<&str>,
        group: Option<u32>,
    ) {
        let dir = self.sys(&format!("devices/pci0000:00/{addr}"));
        std::fs::create_dir_all(&dir).expect("device dir");
        symlink(&dir, self.sys(&format!("bus/pci/devices/{addr}"))).expect("link");
        std::fs::write(dir.join("vendor"), format!("0x{:04x}\n", id.0)).expect("write");
        std::fs::write(dir.join("device"), format!("0x{:04x}\n", id.1)).expect("write");
        std::fs::write(dir.join("class"), format!("0x{class:06x}\n")).expect("write");
        std::fs::write(dir.join("resource0"), b"").expect("write");
        std::fs::write(dir.join("config"), [0u8; 64]).expect("write");
        if let Some(d) = driver {
            let ddir = self.sys(&format!("bus/pci/drivers/{d}"));
            std::fs::create_dir_all(&ddir).expect("driver dir");
            symlink(&ddir, dir.join("driver")).expect("link");
        }
        if let Some(g) = group {
            let gdir = self.sys(&format!("kernel/iommu_groups/{g}"));
            std::fs::create_dir_all(gdir.join("devices")).expect("group dir");
            symlink(&dir, gdir.join("devices").join(addr)).expect("link");
            symlink(&gdir, dir.join("iommu_group")).expect("link");
        }
    }

    fn an_82599(&self, driver: Option<&str>, group: Option<u32>) {
        self.device("0000:03:00.0", (INTEL, 0x10fb), 0x020000, driver, group);
    }

    /// A PCIe root port bound to pcieport in `group` (VFIO allows bridges).
    fn bridge_in_group(&self, group: u32) {
        self.device(
            "0000:00:01.0",
            (INTEL, 0x1901),
            0x060400,
            Some("pcieport"),
            Some(group),
        );
    }

    fn group_type(&self, group: u32, kind: &str) {
        std::fs::write(self.sys(&format!("kernel/iommu_groups/{group}/type")), kind)
            .expect("write");
    }

    fn hugepages(&self, free: u64) {
        let pool = self.sys("kernel/mm/hugepages/hugepages-2048kB");
        std::fs::create_dir_all(&pool).expect("pool dir");
        std::fs::write(pool.join("free_hugepages"), format!("{free}\n")).expect("write");
    }

    fn vfio_container(&self) {
        std::fs::create_dir_all(self.root.join("dev/vfio")).expect("dir");
        std::fs::write(self.root.join("dev/vfio/vfio"), b"").expect("write");
    }

    fn open(&self, addr: &str) -> PciError {
        self.open_with(addr, &IxgbeConfig::new(1))
    }

    fn open_with(&self, addr: &str, cfg: &IxgbeConfig) -> PciError {
        match self.host().device(addr, cfg) {
            Ok(_) => panic!("a fake device opened"),
            Err(e) => e,
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn addr(s: &str) -> PciAddress {
    s.parse().expect("a PCI address")
}

#[test]
fn addresses_parse_with_and_without_a_domain() {
    let a = addr("0000:03:00.0");
    assert_eq!(
        a,
        PciAddress {
            domain: 0,
            bus: 3,
            device: 0,
            function: 0
        }
    );
    assert_eq!(addr("03:00.0"), a, "no domain means domain 0");
    assert_eq!(
        addr("0000:AF:1f.7").to_string(),
        "0000:af:1f.7",
        "sysfs spelling"
    );
    assert_eq!(
        addr("10000:00:02.1").to_string(),
        "10000:00:02.1",
        "VMD domains"
    );
    for bad in [
        "",
        "0000:03:00",
        "03:00.8",
        "03:20.0",
        "g3:00.0",
        "0000:003:00.0",
        "1:2:3:4.0",
        "03:00.0 ",
        "ixgbe:03:00.0",
    ] {
        assert_eq!(
            bad.parse::<PciAddress>(),
            Err(PciError::BadAddress {
                given: bad.to_string()
            }),
            "{bad:?}"
        );
    }
}

#[test]
fn a_missing_device_says_how_to_find_nics() {
    let f = Fake::new("missing");
    let e = f.open("0000:03:00.0");
    assert_eq!(
        e,
        PciError::NoSuchDevice {
            addr: addr("0000:03:00.0")
        }
    );
    assert!(e.to_string().contains("lspci -D -d 8086:"), "{e}");
    assert!(matches!(f.open("03:00"), PciError::BadAddress { .. }));
}

#[test]
fn another_device_is_named_with_its_driver_and_group() {
    let f = Fake::new("virtio");
    f.device(
        "0000:00:02.0",
        (0x1af4, 0x1042),
        0x018000,
        Some("virtio-pci"),
        Some(4),
    );
    let e = f.open("00:02.0");
    assert_eq!(
        e,
        PciError::NotAn82599 {
            addr: addr("0000:00:02.0"),
            vendor: 0x1af4,
            device: 0x1042,
            what: "a virtio block device".into(),
            driver: Some("virtio-pci".into()),
            iommu_group: Some(4),
        }
    );
    let msg = e.to_string();
    assert!(
        msg.contains("virtio block") && msg.contains("1af4:1042"),
        "{msg}"
    );
    assert!(
        msg.contains("virtio-pci") && msg.contains("IOMMU group 4"),
        "{msg}"
    );

    // An 82599 virtual function is not the physical function this driver needs.
    f.device("0000:00:03.0", (INTEL, 0x10ed), 0x020000, None, None);
    assert!(f.open("00:03.0").to_string().contains("virtual function"));
}

#[test]
fn a_kernel_driver_gets_the_commands_to_hand_it_to_vfio() {
    let f = Fake::new("ixgbe");
    f.an_82599(Some("ixgbe"), Some(12));
    let e = f.open("0000:03:00.0");
    assert_eq!(
        e,
        PciError::BoundToKernelDriver {
            addr: addr("0000:03:00.0"),
            device: 0x10fb,
            driver: "ixgbe".into()
        }
    );
    let msg = e.to_string();
    for line in [
        "echo 0000:03:00.0 > /sys/bus/pci/devices/0000:03:00.0/driver/unbind",
        "modprobe vfio-pci",
        "echo vfio-pci > /sys/bus/pci/devices/0000:03:00.0/driver_override",
        "echo 0000:03:00.0 > /sys/bus/pci/drivers/vfio-pci/bind",
        "echo 8086 10fb > /sys/bus/pci/drivers/vfio-pci/new_id",
    ] {
        assert!(msg.contains(line), "{line:?} missing from:\n{msg}");
    }
}

#[test]
fn vfio_pci_without_vfio_or_an_iommu_is_refused() {
    let f = Fake::new("novfio");
    f.an_82599(Some("vfio-pci"), Some(12));
    let e = f.open("0000:03:00.0");
    assert!(
        matches!(&e, PciError::NoVfio { reason, .. } if reason.contains("modprobe vfio-pci")),
        "{e}"
    );
    // This machine's real /dev, where there is no VFIO.
    if !Path::new("/dev/vfio/vfio").exists() {
        let host = PciHost::new(f.root.join("sys"), "/dev");
        let e = host
            .device("0000:03:00.0", &IxgbeConfig::new(1))
            .err()
            .expect("refused");
        assert!(matches!(e, PciError::NoVfio { .. }), "{e}");
    }

    let f = Fake::new("nogroup");
    f.an_82599(Some("vfio-pci"), None);
    let e = f.open("0000:03:00.0");
    assert!(
        matches!(&e, PciError::NoVfio { reason, .. } if reason.contains("intel_iommu=on")),
        "{e}"
    );

    let f = Fake::new("noiommu");
    f.an_82599(Some("vfio-pci"), Some(0));
    std::fs::create_dir_all(f.root.join("dev/vfio")).expect("dir");
    std::fs::write(f.root.join("dev/vfio/noiommu-0"), b"").expect("write");
    let e = f.open("0000:03:00.0");
    assert!(
        matches!(&e, PciError::NoVfio { reason, .. } if reason.contains("no-IOMMU mode")),
        "{e}"
    );
}

#[test]
fn a_group_shared_with_a_kernel_driver_lists_its_devices() {
    let f = Fake::new("viable");
    f.an_82599(Some("vfio-pci"), Some(7));
    f.device(
        "0000:03:00.1",
        (INTEL, 0x10fb),
        0x020000,
        Some("ixgbe"),
        Some(7),
    );
    f.bridge_in_group(7);
    f.vfio_container();
    let e = f.open("0000:03:00.0");
    let member = |a: &str, d: &str| GroupMember {
        addr: a.into(),
        driver: Some(d.into()),
    };
    assert_eq!(
        e,
        PciError::IommuGroupNotViable {
            addr: addr("0000:03:00.0"),
            group: 7,
            members: vec![
                member("0000:00:01.0", "pcieport"),
                member("0000:03:00.0", "vfio-pci"),
                member("0000:03:00.1", "ixgbe"),
            ],
        }
    );
    let msg = e.to_string();
    assert!(msg.contains("IOMMU group 7"), "{msg}");
    assert!(msg.contains("0000:03:00.1 (bound to ixgbe"), "{msg}");
    assert!(msg.contains("0000:03:00.0 (vfio-pci)"), "{msg}");
}

#[test]
fn a_fake_vfio_container_is_a_system_error_not_a_panic() {
    // The group is viable (a bridge with pcieport does not count), so the driver goes
    // on to the container, which is a plain file here: its ioctl fails.
    let f = Fake::new("fakevfio");
    f.an_82599(Some("vfio-pci"), Some(7));
    f.bridge_in_group(7);
    f.vfio_container();
    let e = f.open("0000:03:00.0");
    assert!(
        matches!(&e, PciError::System { what, .. } if what.contains("VFIO_GET_API_VERSION")),
        "{e}"
    );
}

#[test]
fn without_vfio_the_sysfs_path_checks_iommu_ring_and_hugepages() {
    let f = Fake::new("sysfs");
    f.an_82599(None, Some(3));
    f.group_type(3, "DMA-FQ\n");
    let e = f.open("0000:03:00.0");
    assert!(
        matches!(e, PciError::IommuTranslates { group: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("drivers/vfio-pci/bind"), "{e}");

    f.group_type(3, "identity\n");
    let mut cfg = IxgbeConfig::new(1);
    cfg.ring_size = 1024;
    let e = f.open_with("0000:03:00.0", &cfg);
    assert_eq!(e, PciError::RingTooLarge { ring_size: 1024 });
    assert!(e.to_string().contains("at most 512"), "{e}");

    let e = f.open("0000:03:00.0");
    assert_eq!(e, PciError::NoHugepages { free: None });
    f.hugepages(0);
    let e = f.open("0000:03:00.0");
    assert_eq!(e, PciError::NoHugepages { free: Some(0) });
    assert!(
        e.to_string()
            .contains("echo 512 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
        "{e}"
    );
}

#[test]
fn uio_with_hugepages_stops_at_permissions_or_the_fake_bar() {
    let f = Fake::new("uio");
    f.an_82599(Some("uio_pci_generic"), None);
    f.hugepages(4);
    // As root the fake (empty) resource0 is too small for a BAR0; otherwise the
    // pagemap or the files refuse. Either way an error, and the device untouched.
    match f.open("0000:03:00.0") {
        PciError::System { what, error } => {
            assert!(
                what.contains("BAR0") && error.contains("128 KiB"),
                "{error}"
            )
        }
        PciError::NotPermitted { .. } => {}
        e => panic!("unexpected: {e}"),
    }
}

#[test]
fn this_machines_devices_probe_and_none_is_taken_for_an_82599() {
    let host = PciHost::system();
    let Ok(dir) = std::fs::read_dir("/sys/bus/pci/devices") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let a = addr(&name);
        let dev = host.probe(&a).expect("a listed device probes");
        if dev.model_82599().is_some() {
            continue;
        }
        let e = host
            .device(&name, &IxgbeConfig::new(1))
            .err()
            .expect("refused");
        let PciError::NotAn82599 { vendor, what, .. } = &e else {
            panic!("{name}: {e}");
        };
        assert_eq!(*vendor, dev.vendor);
        if dev.vendor == 0x1af4 {
            assert!(what.starts_with("a virtio"), "{e}");
        }
        assert!(e.to_string().contains(&name), "{e}");
    }
}

fn describe(vendor: u16, device: u16, class: u32) -> String {
    PciDevice {
        addr: addr("00:00.0"),
        vendor,
        device,
        class,
        driver: None,
        iommu_group: None,
    }
    .describe()
}

#[test]
fn descriptions_of_common_devices() {
    assert_eq!(
        describe(0x1af4, 0x1041, 0x020000),
        "a virtio network device"
    );
    assert_eq!(
        describe(0x1af4, 0x1000, 0x020000),
        "a virtio network device"
    );
    assert_eq!(describe(0x1af4, 0x1053, 0xffff00), "a virtio vsock device");
    assert_eq!(describe(INTEL, 0x1528, 0x020000), "an Intel X540");
    assert_eq!(
        describe(INTEL, 0x0d57, 0x060000),
        "a host bridge from Intel"
    );
    assert_eq!(describe(0x1234, 0x1111, 0x030000), "a display controller");
    assert_eq!(
        describe(0x1234, 0x1111, 0xff0000),
        "a device of class ff0000"
    );
}

#[test]
fn the_82599_ids_are_the_physical_functions() {
    let dev = |d| PciDevice {
        addr: addr("03:00.0"),
        vendor: INTEL,
        device: d,
        class: 0x020000,
        driver: None,
        iommu_group: None,
    };
    assert_eq!(dev(0x10fb).model_82599(), Some("82599 SFP+"));
    assert_eq!(dev(0x10ed).model_82599(), None, "the VF");
    assert_eq!(dev(0x1528).model_82599(), None, "X540");
    let mut not_intel = dev(0x10fb);
    not_intel.vendor = 0x1af4;
    assert_eq!(not_intel.model_82599(), None);
}
