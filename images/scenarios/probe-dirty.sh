# probe-dirty: the device is not fresh when the driver binds. User space
# (as firmware, a crashed user-space driver or a kexec'd kernel might) raised
# an interrupt through the BAR, so the device's IRQ_COUNT already counts
# one, then put everything else back: interrupt sources off, nothing
# latched, the function disabled again. A driver must start from a known
# state (probe's RESET); one that does not finds IRQ_COUNT one ahead of the
# interrupts it handled (its irq_count step fails).
check device_present find_dev
bars
# INTx disable while the source is up: no interrupt reaches a guest with no
# handler for it; IRQ_COUNT counts it anyway.
intx_mask 1
wr bar0 $INT_ENABLE $INT_SOFT
wr bar0 $INT_RAISE $INT_SOFT
wr bar0 $INT_ACK $INT_SOFT
wr bar0 $INT_ENABLE 0
rd bar0 $IRQ_COUNT
check left_counted [ $(( val )) -eq 1 ]
intx_mask 0
echo 0 > "$dev/enable"
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
