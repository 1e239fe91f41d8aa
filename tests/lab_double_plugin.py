"""$DEPLOYTOOL_PLUGINS=tests.lab_double_plugin: a `deploytool` process the tests start (a lab driver) gets the
lab's runtime TEST DOUBLE, with its knobs from $LAB_DOUBLE_KNOBS."""

from tests import lab_double

lab_double.register()
