# probe-error: the device's wrong_id knob makes identification fail (wrong
# MAGIC); then wrong_version alone (right MAGIC, major 2) must make it fail
# too. Each failed probe must leave the BAR released; once cleared, the
# driver binds.
ktap_plan 11
check device_present find_dev
device '{"cmd":"set_knobs","wrong_id":true}'
check knob_applied wait_reg 0x0 0x0bad0bad
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check not_bound unbound
check region_released sh -c '! grep -q pci_rig /proc/iomem'
device '{"cmd":"set_knobs","wrong_id":false,"wrong_version":true}'
check version_knob_applied wait_reg 0x4 0x00020000
# bind_refused: writing to bind fails, since probe refuses the device.
bind_refused() { ! put /sys/bus/pci/drivers/pci_rig/bind "$bdf" 2>/dev/null; }
check bind_refused_for_version bind_refused
check still_not_bound unbound
check region_released_again sh -c '! grep -q pci_rig /proc/iomem'
device '{"cmd":"clear_knobs"}'
check knob_cleared wait_reg 0x4 0x00010000
check bind_after_clear put /sys/bus/pci/drivers/pci_rig/bind "$bdf"
