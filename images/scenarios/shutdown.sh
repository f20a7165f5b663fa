# shutdown: the guest reboots while the driver keeps a DMA from the device
# running (the stream) and one is in flight. The kernel calls the driver's
# shutdown: it pauses the worker, stops the stream and resets the device; the
# PCI adapter then turns bus mastering off. Nothing of the binding's may reach
# the device after that RESET, and bus mastering must be off before QEMU
# resets the machine.
check device_present find_dev
check stream_offered device_sync '{"cmd":"set_knobs","stream":true,"dma_delay_us":100000}'
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
# The stream ran the judge's 10 rounds (STREAM_ROUNDS): each `# dma received`
# after the self-test's one is a stream DMA that moved its data.
check stream_ran wait_for 100 logged 11 "# dma received"
# A fresh DMA surely in flight when the guest goes down (its delay 1 s).
check long_dma device_sync '{"cmd":"set_knobs","dma_delay_us":1000000}'
check dma_in_flight device_sync '{"cmd":"await_dma"}'
END=reboot
