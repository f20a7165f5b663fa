# probe-error: the device's wrong_id knob makes identification fail (wrong
# MAGIC); then wrong_version alone (right MAGIC, major 2) must make it fail
# too. Each failed probe must leave the BAR released; once cleared, the
# driver binds. Then interrupts are lost (drop_irqs): probe must notice by
# timeout and refuse the device cleanly too. Last, a DMA slower than the
# driver waits (dma_delay_us 2 s): probe times out on it and must stop the
# device before it gives back the DMA memory, which the DMA oracle holds it to.
check device_present find_dev
device '{"cmd":"set_knobs","wrong_id":true}'
check knob_applied wait_reg $MAGIC $WRONG_MAGIC_VALUE
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check not_bound unbound
check region_released sh -c '! grep -q pci_rig /proc/iomem'
device '{"cmd":"set_knobs","wrong_id":false,"wrong_version":true}'
check version_knob_applied wait_reg $VERSION $WRONG_MAJOR_VALUE
# bind_refused: writing to bind fails, since probe refuses the device.
bind_refused() { ! bind_dev pci_rig 2>/dev/null; }
check bind_refused_for_version bind_refused
check still_not_bound unbound
check region_released_again sh -c '! grep -q pci_rig /proc/iomem'
# Interrupts lost (drop_irqs; confirmed by VERSION, set back in the same
# request): the driver waits for an operation's interrupt in vain.
device '{"cmd":"set_knobs","wrong_version":false,"drop_irqs":true}'
check irq_knob_applied wait_reg $VERSION $VERSION_VALUE
check bind_refused_for_lost_irq bind_refused
check unbound_after_lost_irq unbound
check region_released_after_lost_irq sh -c '! grep -q pci_rig /proc/iomem'
# drop_irqs shows in no register: clear it with wrong_id, seen in MAGIC.
device '{"cmd":"set_knobs","drop_irqs":false,"wrong_id":true}'
check irq_knob_cleared wait_reg $MAGIC $WRONG_MAGIC_VALUE
# The slow DMA (confirmed by MAGIC, set back in the same request).
check dma_knob_set device_sync '{"cmd":"set_knobs","wrong_id":false,"dma_delay_us":2000000}'
check dma_knob_applied wait_reg $MAGIC $MAGIC_VALUE
check bind_refused_for_slow_dma bind_refused
check unbound_after_slow_dma unbound
check region_released_after_slow_dma sh -c '! grep -q pci_rig /proc/iomem'
check knobs_cleared device_sync '{"cmd":"clear_knobs"}'
check bind_after_clear bind_dev pci_rig
