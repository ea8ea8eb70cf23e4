/* Placeholder: filled in by the mentorships issue. */
#include "routes/routes.h"

void routes_mentorships_register(void)
{
}
