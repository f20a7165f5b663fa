# dma-error: the receive stream runs, then its DMAs fail while the device
# stays (the `force_error` knob: each operation completes with ERROR and
# moves nothing). The driver must read the status and stop the stream, not
# take the untouched buffer for received data; its binding goes on (the
# worker reads on) and ends cleanly at unbind.
check stream_offered device_sync '{"cmd":"set_knobs","stream":true}'
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
# The stream ran the judge's 10 rounds (STREAM_ROUNDS): each `# dma received`
# after the self-test's one is a stream DMA that moved its data.
check stream_ran wait_for 100 logged 11 "# dma received"
check errors_forced device_sync '{"cmd":"set_knobs","force_error":true}'
check stream_stopped wait_for 100 sh -c 'dmesg | grep -q "event stream_stopped"'
check errors_cleared device_sync '{"cmd":"set_knobs","force_error":false}'
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
