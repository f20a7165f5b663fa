# A guest that reads its device's old BAR once after the device is gone
# (devmem after QMP device_del), without saying so: the device cannot log
# it, so only the MMIO oracle inside QEMU can fail this boot. The same
# devmem load already ran before the oracle was armed (init, with
# pcirig.prearm=devmem): the oracle sees this read only if arming made QEMU
# translate that code anew. Otherwise hotunplug-pciehp's steps.
check device_present find_dev
old_bar0=$(( $(sed -n 1p "$dev/resource" | cut -d' ' -f1) ))
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
host unplug
check removed wait_for 300 gone
devmem $old_bar0 32 > /dev/null
settle
host replug
check present_again wait_for 300 find_dev
check bound_again wait_for 100 bound_to pci_rig
