# pm-soak: pm's system sleep fifty times in one boot (pm_test's `platform`
# level, no delay), the worker busy in between: every cycle the driver's
# sleep, D3hot, D0 and its wake; in the debug flavour kmemleak then looks for
# anything the cycles leaked. Then unbind.
sleeps() {
    i=1
    while [ $i -le 50 ]; do
        put /sys/power/state freeze || { echo "sleep $i failed"; return 1; }
        i=$((i + 1))
    done
}
check device_present find_dev
check insmod_pci_rig insmod /lib/modules/pci_rig.ko
check bound bound_to pci_rig
sleep 1 # let the worker run
check pm_test_platform put /sys/power/pm_test platform
check pm_test_no_delay put /sys/module/suspend/parameters/pm_test_delay 0
check fifty_sleeps sleeps
check still_bound bound_to pci_rig
check unbind unbind_dev pci_rig
check unbound unbound
settle
