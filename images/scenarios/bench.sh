# bench: figures, not verdicts (see guest-kernel/bench/pci_rig_bench.rs).
# Loading pci_rig_bench times MMIO reads on our device and on QEMU's
# pci-testdev; then our device is unbound and bound again, each probe with the
# next unbind case (K Devres values, worker idle or busy). `cargo xtask bench`
# asks for 30 rebinds (5 of each of the 6 cases) with pcirig.bench_rounds=30;
# the default run only proves every figure comes out: one of each.
rounds=$(param bench_rounds 6)
check device_present find_dev
check insmod_bench insmod /lib/modules/pci_rig_bench.ko
check bound bound_to pci_rig_bench
# rebind_rounds N: N unbind+bind cycles, the worker (if any) busy for 0.2 s.
rebind_rounds() {
    i=0
    while [ $i -lt "$1" ]; do
        sleep 0.2
        unbind_dev pci_rig_bench &&
            bind_dev pci_rig_bench &&
            bound_to pci_rig_bench || return 1
        i=$((i + 1))
    done
}
check unbind_cases rebind_rounds "$rounds"
check rmmod_bench rmmod pci_rig_bench
