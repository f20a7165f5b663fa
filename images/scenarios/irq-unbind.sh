# irq-unbind: the device raises a software interrupt by itself every 2 ms
# (irq_every_us), whatever INT_ENABLE says (irq_ignore_enable: remove()'s
# RESET does not silence it), while the driver is bound and its worker
# busy; the binding ends under that load, first by sysfs unbind, then,
# bound again, by native PCIe hot-unplug. Interrupts keep coming while each
# binding ends; the handler must never run after its binding ended: no
# device access after either end, none refused the BAR, no splat.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
device '{"cmd":"set_knobs","irq_every_us":2000,"irq_ignore_enable":true}'
sleep 1 # interrupts and the worker under way
check unbind unbind_dev pci_rig
check unbound unbound
settle
# Quiet for the second probe (its self-test counts interrupts exactly).
device '{"cmd":"set_knobs","irq_every_us":0,"irq_ignore_enable":false}'
check rebind bind_dev pci_rig
check bound_again bound_to pci_rig
device '{"cmd":"set_knobs","irq_every_us":2000,"irq_ignore_enable":true}'
sleep 1
host unplug
check removed wait_for 300 gone
settle
