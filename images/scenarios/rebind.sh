# rebind: unbind, then bind the same device again; the guest stays up a
# while between the two (late accesses of the first binding would show),
# and the second binding ends too (rmmod), so the host accounts for every
# access of both.
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check unbind unbind_dev pci_rig
check unbound unbound
settle
check bind_again bind_dev pci_rig
check bound_again bound_to pci_rig
check rmmod_pci_rig rmmod pci_rig
# The second binding ended too: stay up a while after it as well.
settle
