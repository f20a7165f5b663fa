# cpufreq: rcpufreq_dt (guest-kernel/platform, a Rust cpufreq-dt) binds the
# "pci-rig,cpufreq-dt" node the host added, with a settable CPU clock and an
# OPP table (harness/rig/src/guest/dt.rs). The policy must list the table; each
# frequency, set through the userspace governor, must show in
# scaling_cur_freq (the core's record), cpuinfo_cur_freq (read from the
# policy's clock) and as the clock's rate (debugfs); rmmod must unregister
# the driver and remove the policy, and leave the clock's prepare and enable
# counts (the clock framework's, debugfs) as they were before insmod. The
# host also judges the driver's and the clock's own lines.
pol=/sys/devices/system/cpu/cpufreq/policy0
clk=/sys/kernel/debug/clk/pcirig-cpu/clk_rate
# The frequencies harness/rig/src/guest/dt.rs puts in the OPP table, in kHz.
opps="250000 500000 750000 1000000"
same() { [ "$1" = "$2" ] || { echo "got '$1', want '$2'"; return 1; }; }
# The clock framework's own counts of the CPU clock before the driver: a
# binding must give back every prepare and enable it took.
mount -t debugfs debugfs /sys/kernel/debug
counts() { echo "$(cat ${clk%/*}/clk_prepare_count) $(cat ${clk%/*}/clk_enable_count)"; }
before=$(counts)
umount /sys/kernel/debug
check insmod_rcpufreq_dt insmod /lib/modules/rcpufreq_dt.ko
check driver_registered same "$(cat $pol/scaling_driver)" rcpufreq-dt
check policy_covers_both_cpus same "$(cat $pol/related_cpus)" "0 1"
check available_frequencies same "$(echo $(cat $pol/scaling_available_frequencies))" "$opps"
check userspace_governor put $pol/scaling_governor userspace
mount -t debugfs debugfs /sys/kernel/debug
# One frequency at a time, each check on its own line (images/init counts
# them for the plan): set it, then read it back three ways.
check set_250000 put $pol/scaling_setspeed 250000
check cur_250000 same "$(cat $pol/scaling_cur_freq)" 250000
check cpuinfo_250000 same "$(cat $pol/cpuinfo_cur_freq)" 250000
check clock_250000 same "$(cat $clk)" 250000000
check set_500000 put $pol/scaling_setspeed 500000
check cur_500000 same "$(cat $pol/scaling_cur_freq)" 500000
check cpuinfo_500000 same "$(cat $pol/cpuinfo_cur_freq)" 500000
check clock_500000 same "$(cat $clk)" 500000000
check set_750000 put $pol/scaling_setspeed 750000
check cur_750000 same "$(cat $pol/scaling_cur_freq)" 750000
check cpuinfo_750000 same "$(cat $pol/cpuinfo_cur_freq)" 750000
check clock_750000 same "$(cat $clk)" 750000000
check set_1000000 put $pol/scaling_setspeed 1000000
check cur_1000000 same "$(cat $pol/scaling_cur_freq)" 1000000
check cpuinfo_1000000 same "$(cat $pol/cpuinfo_cur_freq)" 1000000
check clock_1000000 same "$(cat $clk)" 1000000000
umount /sys/kernel/debug
check rmmod_rcpufreq_dt rmmod rcpufreq_dt
mount -t debugfs debugfs /sys/kernel/debug
check clock_counts_given_back same "$(counts)" "$before"
umount /sys/kernel/debug
check policy_gone eval '[ ! -e $pol/scaling_driver ]'
