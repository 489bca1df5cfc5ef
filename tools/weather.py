"""Current weather and daily forecast from Open-Meteo (no API key needed)."""

from dataclasses import dataclass
from typing import Any, Literal

from settings import settings
from tools.errors import ToolInputError
from tools.json_api import get_json

MAX_FORECAST_DAYS = 16
CANDIDATES_WITH_QUALIFIER = 10

CURRENT_FIELDS = "temperature_2m,relative_humidity_2m,apparent_temperature,weather_code,wind_speed_10m"
DAILY_FIELDS = "weather_code,temperature_2m_max,temperature_2m_min,precipitation_sum"

UNIT_PARAMS = {
    "metric": {"temperature_unit": "celsius", "wind_speed_unit": "kmh", "precipitation_unit": "mm"},
    "imperial": {"temperature_unit": "fahrenheit", "wind_speed_unit": "mph", "precipitation_unit": "inch"},
}

# WMO weather interpretation codes as documented by Open-Meteo.
WMO_DESCRIPTIONS = {
    0: "clear sky",
    1: "mainly clear",
    2: "partly cloudy",
    3: "overcast",
    45: "fog",
    48: "depositing rime fog",
    51: "light drizzle",
    53: "moderate drizzle",
    55: "dense drizzle",
    56: "light freezing drizzle",
    57: "dense freezing drizzle",
    61: "slight rain",
    63: "moderate rain",
    65: "heavy rain",
    66: "light freezing rain",
    67: "heavy freezing rain",
    71: "slight snowfall",
    73: "moderate snowfall",
    75: "heavy snowfall",
    77: "snow grains",
    80: "slight rain showers",
    81: "moderate rain showers",
    82: "violent rain showers",
    85: "slight snow showers",
    86: "heavy snow showers",
    95: "thunderstorm",
    96: "thunderstorm with slight hail",
    99: "thunderstorm with heavy hail",
}


@dataclass(frozen=True)
class WeatherConfig:
    forecast_url: str
    geocoding_url: str
    timeout: float

    @classmethod
    def from_env(cls) -> "WeatherConfig":
        config = settings()
        return cls(
            forecast_url=config.OPEN_METEO_URL.rstrip("/"),
            geocoding_url=config.OPEN_METEO_GEOCODING_URL.rstrip("/"),
            timeout=config.WEATHER_TIMEOUT,
        )


async def weather(city: str, days: int = 1, units: Literal["metric", "imperial"] = "metric") -> dict:
    """Current weather and a daily forecast for a place, from Open-Meteo.

    Gives temperature, feels-like temperature, humidity, wind speed and conditions in words
    now, and per day the conditions, min/max temperature and total precipitation, in the
    place's local time.

    Args:
        city: Place name, e.g. "Berlin". To pick among places with the same name, add region
            and/or country after commas: "Portland, Oregon", "Paris, FR",
            "Springfield, Illinois, United States".
        days: Forecast days including today, 1 to 16 (default 1: today only).
        units: "metric" (°C, km/h, mm; default) or "imperial" (°F, mph, inch).

    Returns:
        {"location": {"name", "region", "country", "latitude", "longitude", "timezone"},
         "units": {"temperature", "wind_speed", "precipitation", "humidity"},
         "current": {"time" (local, ISO), "temperature", "apparent_temperature",
                     "relative_humidity", "wind_speed", "weather_code", "description"},
         "daily": [{"date", "description", "weather_code", "temperature_max",
                    "temperature_min", "precipitation_sum"}, ...one per day]}
        "description" is a plain-words reading of the WMO weather code, e.g. "light drizzle".
    """
    name, qualifiers = _parse_place(city)
    if not isinstance(days, int) or not 1 <= days <= MAX_FORECAST_DAYS:
        raise ToolInputError(f"days must be an integer from 1 to {MAX_FORECAST_DAYS}, got {days!r}.")
    if units not in UNIT_PARAMS:
        raise ToolInputError(f"units must be 'metric' or 'imperial', got {units!r}.")

    config = WeatherConfig.from_env()
    place = await _geocode(config, name, qualifiers)
    forecast = await get_json(
        "Open-Meteo forecast",
        f"{config.forecast_url}/v1/forecast",
        params={
            "latitude": place["latitude"],
            "longitude": place["longitude"],
            "current": CURRENT_FIELDS,
            "daily": DAILY_FIELDS,
            "timezone": "auto",
            "forecast_days": days,
            **UNIT_PARAMS[units],
        },
        timeout=config.timeout,
    )
    return _summarize(place, forecast)


def _parse_place(city: str) -> tuple[str, list[str]]:
    parts = [part.strip() for part in str(city).split(",")]
    if not parts[0] or len(parts[0]) < 2:
        raise ToolInputError(f"city must be a place name of at least 2 characters, got {city!r}.")
    return parts[0], [part for part in parts[1:] if part]


async def _geocode(config: WeatherConfig, name: str, qualifiers: list[str]) -> dict:
    found = await get_json(
        "Open-Meteo geocoding",
        f"{config.geocoding_url}/v1/search",
        params={
            "name": name,
            "count": CANDIDATES_WITH_QUALIFIER if qualifiers else 1,
            "language": "en",
            "format": "json",
        },
        timeout=config.timeout,
    )
    candidates = found.get("results") or []
    if not candidates:
        raise ToolInputError(
            f"No place found for {name!r}. Give a city name only, e.g. 'Berlin', "
            "optionally followed by region or country after a comma."
        )
    for candidate in candidates:
        if all(_matches(candidate, qualifier) for qualifier in qualifiers):
            return candidate
    listed = "; ".join(_label(candidate) for candidate in candidates)
    raise ToolInputError(f"No place named {name!r} in {', '.join(qualifiers)!r}. Places with that name: {listed}.")


def _matches(candidate: dict, qualifier: str) -> bool:
    wanted = qualifier.casefold()
    fields = ("country", "country_code", "admin1", "admin2", "admin3")
    return any(str(candidate.get(field) or "").casefold() == wanted for field in fields)


def _label(candidate: dict) -> str:
    parts = [candidate.get(field) for field in ("name", "admin1", "country")]
    return ", ".join(str(part) for part in parts if part)


def _summarize(place: dict, forecast: dict) -> dict:
    current = forecast.get("current") or {}
    current_units = forecast.get("current_units") or {}
    daily = forecast.get("daily") or {}
    daily_units = forecast.get("daily_units") or {}
    return {
        "location": {
            "name": place.get("name"),
            "region": place.get("admin1"),
            "country": place.get("country"),
            "latitude": place.get("latitude"),
            "longitude": place.get("longitude"),
            "timezone": forecast.get("timezone") or place.get("timezone"),
        },
        "units": {
            "temperature": current_units.get("temperature_2m"),
            "wind_speed": current_units.get("wind_speed_10m"),
            "precipitation": daily_units.get("precipitation_sum"),
            "humidity": current_units.get("relative_humidity_2m"),
        },
        "current": {
            "time": current.get("time"),
            "temperature": current.get("temperature_2m"),
            "apparent_temperature": current.get("apparent_temperature"),
            "relative_humidity": current.get("relative_humidity_2m"),
            "wind_speed": current.get("wind_speed_10m"),
            "weather_code": current.get("weather_code"),
            "description": _describe(current.get("weather_code")),
        },
        "daily": [
            {
                "date": date,
                "description": _describe(_at(daily, "weather_code", index)),
                "weather_code": _at(daily, "weather_code", index),
                "temperature_max": _at(daily, "temperature_2m_max", index),
                "temperature_min": _at(daily, "temperature_2m_min", index),
                "precipitation_sum": _at(daily, "precipitation_sum", index),
            }
            for index, date in enumerate(daily.get("time") or [])
        ],
    }


def _at(series: dict, field: str, index: int) -> Any:
    values = series.get(field) or []
    return values[index] if index < len(values) else None


def _describe(code: int | None) -> str | None:
    if code is None:
        return None
    return WMO_DESCRIPTIONS.get(code, f"unknown weather code {code}")
