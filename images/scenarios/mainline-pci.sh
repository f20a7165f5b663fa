# mainline-pci: upstream's own Rust PCI samples (Linux 7.x and its
# abstractions, no code of ours) on QEMU's pci-testdev, one after the other:
# rust_driver_pci, rust_dma and rust_driver_auxiliary, each probed, unbound,
# bound again and unloaded.
check device_present find_testdev
check insmod_rust_driver_pci insmod /lib/modules/rust_driver_pci.ko
check bound_rust_driver_pci bound_to rust_driver_pci
check unbind_rust_driver_pci unbind_dev rust_driver_pci
check unbound_rust_driver_pci unbound
check bind_again_rust_driver_pci bind_dev rust_driver_pci
check bound_again_rust_driver_pci bound_to rust_driver_pci
check rmmod_rust_driver_pci rmmod rust_driver_pci
check unbound_at_last_rust_driver_pci unbound
check insmod_rust_dma insmod /lib/modules/rust_dma.ko
check bound_rust_dma bound_to rust_dma
check unbind_rust_dma unbind_dev rust_dma
check unbound_rust_dma unbound
check bind_again_rust_dma bind_dev rust_dma
check bound_again_rust_dma bound_to rust_dma
check rmmod_rust_dma rmmod rust_dma
check unbound_at_last_rust_dma unbound
check insmod_rust_driver_auxiliary insmod /lib/modules/rust_driver_auxiliary.ko
check bound_rust_driver_auxiliary bound_to rust_driver_auxiliary
check unbind_rust_driver_auxiliary unbind_dev rust_driver_auxiliary
check unbound_rust_driver_auxiliary unbound
check bind_again_rust_driver_auxiliary bind_dev rust_driver_auxiliary
check bound_again_rust_driver_auxiliary bound_to rust_driver_auxiliary
check rmmod_rust_driver_auxiliary rmmod rust_driver_auxiliary
check unbound_at_last_rust_driver_auxiliary unbound
settle
