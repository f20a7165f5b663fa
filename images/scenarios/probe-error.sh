# probe-error: the device's wrong_id knob makes identification fail; probe
# must fail cleanly and release the BAR; once cleared, the driver binds.
ktap_plan 7
check device_present find_dev
device '{"cmd":"set_knobs","wrong_id":true}'
check knob_applied wait_magic 0x0bad0bad
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check not_bound unbound
check region_released sh -c '! grep -q pci_rig /proc/iomem'
device '{"cmd":"clear_knobs"}'
check knob_cleared wait_magic 0x70726967
check bind_after_clear put /sys/bus/pci/drivers/pci_rig/bind "$bdf"
