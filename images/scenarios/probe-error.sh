# probe-error: the device's wrong_id knob makes identification fail (wrong
# MAGIC); then wrong_version alone (right MAGIC, major 2) must make it fail
# too. Each failed probe must leave the BAR released; once cleared, the
# driver binds. Then interrupts are lost (drop_irqs): probe must notice by
# timeout and refuse the device cleanly too.
check device_present find_dev
device '{"cmd":"set_knobs","wrong_id":true}'
check knob_applied wait_reg 0x0 0x0bad0bad
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check not_bound unbound
check region_released sh -c '! grep -q pci_rig /proc/iomem'
device '{"cmd":"set_knobs","wrong_id":false,"wrong_version":true}'
check version_knob_applied wait_reg 0x4 0x00020000
# bind_refused: writing to bind fails, since probe refuses the device.
bind_refused() { ! bind_dev pci_rig 2>/dev/null; }
check bind_refused_for_version bind_refused
check still_not_bound unbound
check region_released_again sh -c '! grep -q pci_rig /proc/iomem'
# Interrupts lost (drop_irqs; confirmed by VERSION, set back in the same
# request): the driver waits for an operation's interrupt in vain.
device '{"cmd":"set_knobs","wrong_version":false,"drop_irqs":true}'
check irq_knob_applied wait_reg 0x4 0x00010000
check bind_refused_for_lost_irq bind_refused
check unbound_after_lost_irq unbound
check region_released_after_lost_irq sh -c '! grep -q pci_rig /proc/iomem'
# drop_irqs shows in no register: clear it with wrong_id, seen in MAGIC.
device '{"cmd":"set_knobs","drop_irqs":false,"wrong_id":true}'
check irq_knob_cleared wait_reg 0x0 0x0bad0bad
device '{"cmd":"clear_knobs"}'
check knob_cleared wait_reg 0x0 0x70726967
check bind_after_clear bind_dev pci_rig
