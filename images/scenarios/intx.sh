# intx: the device's INTx reaches the guest. uio_pci_generic (the kernel's
# generic INTx handler: it masks INTx with the command register's disable
# bit; user space unmasks by clearing that bit through sysfs) takes the device; each
# software interrupt raised through INT_RAISE must show up exactly once in
# /proc/interrupts and in the device's IRQ_COUNT. Register accesses are
# reported as `# mmio` lines and checked against the device's access log.
rounds=10
check device_present find_dev
echo 7072 0001 > /sys/bus/pci/drivers/uio_pci_generic/new_id 2>/dev/null
check bound_to_uio bound_to uio_pci_generic
bars
# Sum of the per-CPU columns of uio_pci_generic's line.
irqs() {
    awk '/uio_pci_generic/ { s = 0; for (i = 2; $i ~ /^[0-9]+$/; i++) s += $i; print s }' /proc/interrupts
}
irqs_are() { [ "$(irqs)" = "$1" ]; }
# Waits up to ~5 s for /proc/interrupts to reach $1.
wait_irqs() { wait_for 50 irqs_are "$1"; }
check irq_line_listed sh -c "grep uio_pci_generic /proc/interrupts"
before=$(irqs)
echo "# intx irq line: $(grep uio_pci_generic /proc/interrupts)"
wr bar0 0x34 0x4
n=0; lost=0
while [ $n -lt $rounds ]; do
    intx_mask 0
    wr bar0 0x38 0x4
    wait_irqs $(( before + n + 1 )) || lost=$((lost + 1))
    wr bar0 0x3c 0x4
    n=$((n + 1))
done
after=$(irqs)
echo "# intx /proc/interrupts $before -> $after over $rounds raises, $lost waits timed out"
check every_raise_interrupted [ $(( after - before )) -eq $rounds ]
check no_wait_timed_out [ $lost -eq 0 ]
rd bar0 0x40
check device_counted_them [ $(( val )) -eq $rounds ]
rd bar0 0x30
check all_acked [ $(( val )) -eq 0 ]
