# aer: PCIe Advanced Error Reporting errors injected (HMP
# pcie_aer_inject_error) while the driver's worker is busy: a correctable
# one, then an uncorrectable non-fatal one. The guest must survive both and
# the driver stay bound; the kernel's AER lines are the report. Our device
# is conventional PCI to QEMU (no PCI Express capability: QEMU refuses to
# inject at it, "not a PCIe device"), so the errors are injected at the root
# port it sits behind, rp0.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
sleep 1 # let the worker run
host aer rp0 RCVR
check correctable_logged wait_for 100 sh -c 'dmesg | grep -q "AER: Correctable error"'
host aer rp0 POISON_TLP
check uncorrectable_logged wait_for 100 sh -c 'dmesg | grep -q "AER: Uncorrectable (Non-Fatal) error"'
sleep 2 # let recovery finish
check still_bound bound_to pci_rig
