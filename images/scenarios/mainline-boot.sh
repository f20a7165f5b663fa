# mainline-boot: boot, on Linux 7.x as upstream has it.
. /scenarios/boot.sh
