# irq-msi: unbind's steps, the driver on MSI (every machine of the rig has
# it): each operation's DONE and 10 software interrupts handled once, the
# device's IRQ_COUNT equal to the handler's count.
. /scenarios/unbind.sh
