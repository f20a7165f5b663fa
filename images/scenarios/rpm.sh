# rpm: runtime PM with our driver bound and its worker busy. The PCI core
# starts every device at power/control=on (runtime PM forbidden); user space
# allows it, and the device, idle (the worker reads without holding it awake),
# sleeps after the driver's 50 ms autosuspend delay: the driver's runtime
# suspend stops it, the PCI core puts it into D3hot. Then the worker's
# heartbeat wakes it now and then (resume on access: a runtime PM reference),
# user space wakes it (control=on) and lets it sleep again, and the unbind
# ends the binding while it sleeps (the PCI core wakes it for remove). It
# comes back without its registers each time (no No_Soft_Reset).
rpm_is() { read -r s < "$dev/power/runtime_status"; [ "$s" = "$1" ]; }
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
check worker_reading wait_for 100 logged 1 "event worker_reading"
check rpm_forbidden_at_first rpm_is active
check rpm_allow put "$dev/power/control" auto
check rpm_suspended wait_for 100 rpm_is suspended
# A heartbeat woke it and it fell asleep again (a second runtime suspend): with
# user space's two, the three stays the judge wants at least.
check heartbeat_stay wait_for 100 logged 2 "event rpm_suspend"
check rpm_wake put "$dev/power/control" on
check rpm_awake rpm_is active
check rpm_allow_again put "$dev/power/control" auto
check rpm_suspended_again wait_for 100 rpm_is suspended
check unbind unbind_dev pci_rig
check unbound unbound
settle
