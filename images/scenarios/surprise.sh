# surprise: the device starts answering all-ones (the `all_ones` knob: what a
# read of a device that is no longer there returns) while the driver's worker
# is busy with it. The worker must notice and stop touching it by itself;
# then the host removes the device (QMP device_del) and the guest lives on.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
# dma-surprise (STREAM): the stream ran the judge's 10 rounds (each `# dma
# received` after the self-test's one) before the device vanishes.
stream_ran() { [ -z "$STREAM" ] || wait_for 100 logged 11 "# dma received"; }
check stream_ran stream_ran
device '{"cmd":"set_knobs","all_ones":true}'
check worker_gave_up wait_for 100 sh -c 'dmesg | grep -q worker_gave_up'
host unplug
check removed wait_for 300 gone
check unplug_settled unplug_settled
settle
