package engine

import ()
