# bench: figures, not verdicts. pci_rig_bench times register reads on our
# device and on QEMU's pci-testdev in this same boot, and our BAR2 window's
# throughput; it releases both devices on rmmod.
ktap_plan 3
check device_present find_dev
check insmod_bench insmod /lib/modules/pci_rig_bench.ko
check rmmod_bench rmmod pci_rig_bench
